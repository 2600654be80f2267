"""Findings and job pages: a job's timeline and findings, the findings list and its state changes, a cluster's hours."""

from collections.abc import Mapping
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Max
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from governance.costs.breakdowns import job_charges
from governance.costs.ledger import gpu_share
from governance.dashboard.advice import findings_ordered, group_by_job, title
from governance.dashboard.figures.cluster import ClusterHour, cluster_utilisation
from governance.dashboard.figures.jobs import GpuHourPoint, idle_strip, job_timeline
from governance.dashboard.utilisation import share
from governance.efficiency import selectors
from governance.efficiency.models import Finding
from governance.efficiency.rules import RULES
from governance.efficiency.services import FindingStateError, finding_state_set
from governance.efficiency.summary import gib
from governance.efficiency.thresholds import thresholds_from_settings
from governance.efficiency.workloads import realised_savings_of, workload_savings
from governance.fleet.models import Cluster
from governance.lib.months import Month
from governance.org.auth import signed_in_user
from governance.org.selectors import teams_led
from governance.remediation.selectors import reclaimed_cluster_month
from governance.usage.selectors import job_history

CLUSTER_DAYS = 7
JOBS_PER_PAGE = 25
BULK_LIMIT = 500
STATES = ["live", *Finding.State.values]

PAGE_STATES = ("acknowledged", "dismissed", "resolved", "open")
UNKNOWN_STATE = "state: choose acknowledged, dismissed, resolved or open"


@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = selectors.job_visible(user=signed_in_user(request), pk=pk)
    if job is None:
        raise Http404("No such job.")
    timeline = selectors.job_gpu_timeline(job=job)
    points = [
        GpuHourPoint(
            gpu=f"{row['gpu__node__name']}:{row['gpu__index']}",
            hour=row["hour"],
            sm_percent=_hour_sm(row),
            mem_gib=gib(row["mem_used_max"]) if row["mem_used_max"] is not None else None,
            power_w=row["power_sum"] / row["power_samples"] if row["power_samples"] else None,
        )
        for row in timeline
    ]
    findings = findings_ordered(selectors.findings_visible(user=signed_in_user(request), job_pk=job.pk))
    charges = job_charges(job_id=job.pk)
    peaks = [p.mem_gib for p in points if p.mem_gib is not None]
    context = {
        "job": job,
        "figure": job_timeline(points),
        "idle_strip": idle_strip(points, thresholds_from_settings().idle_sm_percent),
        "has_data": bool(points),
        "plotly": bool(points),
        "findings": findings,
        "workloads": {f.pk: w for f in findings if (w := workload_savings(finding=f)) is not None},
        "realised": realised_savings_of(findings),
        "charges": charges,
        "sm_mean": charges.used_gpu_hours / charges.gpu_hours if charges and charges.gpu_hours else None,
        "mem_peak_gib": max(peaks) if peaks else None,
        "running": job.end_time is None,
        "history": list(job_history(job=job)),
        "gpu_share": gpu_share(job.gpus),
        **_own_sm(timeline),
    }
    return render(request, "efficiency/job.html", context)


def _hour_sm(row: Mapping[str, Any]) -> float | None:
    """An hour's SM on the timeline: the job's own processes' where the GPU was split by process, else the GPU's."""
    if row["job_sm_samples"]:
        return row["job_sm_sum"] / row["job_sm_samples"]
    return row["sm_sum"] / row["sm_samples"] if row["sm_samples"] else None


def _own_sm(timeline: list[Mapping[str, Any]]) -> dict[str, float | None]:
    """How much of the job's SM is its own processes' (a shared GPU split by process): the part of its samples
    that were, and their mean (both shares of 1). None: the page says its SM is the GPU's."""
    own = sum(r["job_sm_samples"] for r in timeline)
    known = sum(r["sm_samples"] for r in timeline)
    if not own:
        return {"own_sm_part": None, "own_sm_mean": None}
    return {"own_sm_part": min(own / known, 1.0) if known else 1.0,
            "own_sm_mean": sum(r["job_sm_sum"] for r in timeline) / own / 100}  # fmt: skip


FILTERS = ("team", "rule", "state", "job", "mine")


def _findings_filters(request: HttpRequest) -> dict:
    """The page's filters, the API's (team, rule, state, job, mine), each bounded; state defaults to live."""
    query = {k: str(v).replace("\x00", "")[:200] for k, v in request.GET.items()}  # PostgreSQL text cannot hold a NUL
    return {
        "team": query.get("team") or None,
        "rule": query.get("rule") if query.get("rule") in RULES else None,
        "state": query.get("state", "live") if query.get("state", "live") in STATES else None,
        "job": query.get("job", "").strip() or None,
        "mine": query.get("mine") in ("1", "true", "on"),
    }


@login_required
def findings_list(request: HttpRequest) -> HttpResponse:
    """Findings grouped by job, jobs by their biggest saving, JOBS_PER_PAGE jobs a page, with the counts."""
    chosen = _findings_filters(request)
    findings = selectors.findings_visible(user=signed_in_user(request), **chosen)
    jobs = findings.values("job_id").annotate(top=Max("savings")).order_by("-top", "job_id")
    pages = Paginator(jobs, JOBS_PER_PAGE)
    page = pages.get_page(request.GET.get("page"))
    on_page = findings.filter(job_id__in=[r["job_id"] for r in page.object_list])
    params = {k: ("1" if v is True else v) for k, v in chosen.items() if v}
    context = {
        "groups": group_by_job(on_page),
        "page": page,
        "count": findings.count(),
        "jobs_count": pages.count,
        "teams": teams_led(user=signed_in_user(request)),
        "rules": [(r, title(r)) for r in RULES],
        "states": STATES,
        "selected": {**{k: v or "" for k, v in chosen.items()}},
        "query": urlencode(params),
        "bulk": True,
    }
    return render(request, "efficiency/findings.html", context)


@login_required
@require_POST
def findings_bulk(request: HttpRequest) -> HttpResponse:
    """Acknowledge or dismiss the ticked findings the user may see; says how many changed and why others did not."""
    user = signed_in_user(request)
    ids = [int(i) for i in request.POST.getlist("ids") if i.isascii() and i.isdigit()][:BULK_LIMIT]
    visible = set(selectors.findings_visible(user=user).filter(pk__in=ids).values_list("pk", flat=True))
    dismiss = request.POST.get("state") == "dismissed"
    changed, problems = 0, set()
    for pk in sorted(visible):
        try:
            state = Finding.State.DISMISSED if dismiss else Finding.State.ACKNOWLEDGED
            reason = request.POST.get("reason", "")[:2000]
            finding_state_set(finding_id=pk, user=user, state=state, reason=reason)
            changed += 1
        except FindingStateError as exc:
            problems.add(str(exc))
    done = "dismissed" if dismiss else "acknowledged"
    messages.info(request, f"{changed} finding{'s' if changed != 1 else ''} {done}.")
    for problem in sorted(problems):
        messages.error(request, problem)
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = reverse("efficiency:findings")
    return HttpResponseRedirect(back)


@login_required
@require_POST
def finding_state(request: HttpRequest, pk: int) -> HttpResponse:
    user = signed_in_user(request)
    if not selectors.findings_visible(user=user).filter(pk=pk).exists():
        raise Http404("No such finding.")
    state = request.POST.get("state", "")
    try:
        if state not in PAGE_STATES:
            raise FindingStateError(UNKNOWN_STATE)
        finding_state_set(finding_id=pk, user=user, state=state, reason=request.POST.get("reason", "")[:2000])
    except FindingStateError as exc:
        messages.error(request, str(exc))
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = reverse("efficiency:findings")
    return HttpResponseRedirect(back)


@login_required
def cluster_detail(request: HttpRequest, name: str) -> HttpResponse:
    cluster = get_object_or_404(Cluster, name=name)
    now = timezone.now()
    rows = selectors.cluster_hours(cluster_id=cluster.pk, start=now - timedelta(days=CLUSTER_DAYS), end=now)
    hours = [ClusterHour(r["hour"], r["gpus"], r["used"] or 0.0, r["idle"] or 0.0) for r in rows]
    capacity = sum(h.gpus for h in hours)
    context = {
        "cluster": cluster,
        "figure": cluster_utilisation(hours, settings.GOVERNANCE_CLUSTER_TARGET_UTIL_PERCENT),
        "has_data": bool(hours),
        "plotly": bool(hours),
        "utilisation": share(sum(h.used_gpu_hours for h in hours), capacity),
        "idle_gpu_hours": sum(h.idle_gpu_hours for h in hours),
        "target": settings.GOVERNANCE_CLUSTER_TARGET_UTIL_PERCENT,
        "top_jobs": selectors.cluster_top_jobs(user=signed_in_user(request), cluster_id=cluster.pk),
        "days": CLUSTER_DAYS,
        "reclaimed": reclaimed_cluster_month(cluster_id=cluster.pk, month=Month.of(now)),
    }
    return render(request, "efficiency/cluster.html", context)
