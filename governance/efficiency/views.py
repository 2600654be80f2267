from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from governance.costs.breakdowns import job_charges
from governance.dashboard.advice import findings_ordered
from governance.dashboard.figures.cluster import ClusterHour, cluster_utilisation
from governance.dashboard.figures.jobs import GpuHourPoint, job_timeline
from governance.efficiency import selectors
from governance.efficiency.models import Finding
from governance.efficiency.rules import RULES
from governance.efficiency.services import FindingStateError, finding_acknowledge, finding_dismiss
from governance.efficiency.summary import gib
from governance.fleet.models import Cluster
from governance.org.selectors import teams_led

CLUSTER_DAYS = 7


@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = selectors.job_visible(user=request.user, pk=pk)
    if job is None:
        raise Http404("No such job.")
    points = [
        GpuHourPoint(
            gpu=f"{row['gpu__node__name']}:{row['gpu__index']}",
            hour=row["hour"],
            sm_percent=row["sm_sum"] / row["sm_samples"] if row["sm_samples"] else None,
            mem_gib=gib(row["mem_used_max"]) if row["mem_used_max"] is not None else None,
            power_w=row["power_sum"] / row["power_samples"] if row["power_samples"] else None,
        )
        for row in selectors.job_gpu_timeline(job=job)
    ]
    findings = findings_ordered(selectors.findings_visible(user=request.user, job=str(job.pk)))
    charges = job_charges(job_id=job.pk)
    peaks = [p.mem_gib for p in points if p.mem_gib is not None]
    context = {
        "job": job,
        "figure": job_timeline(points),
        "has_data": bool(points),
        "findings": findings,
        "charges": charges,
        "sm_mean": charges.used_gpu_hours / charges.gpu_hours if charges and charges.gpu_hours else None,
        "mem_peak_gib": max(peaks) if peaks else None,
        "running": job.end_time is None,
    }
    return render(request, "efficiency/job.html", context)


@login_required
def findings_list(request: HttpRequest) -> HttpResponse:
    query = {k: v.replace("\x00", "") for k, v in request.GET.items()}  # PostgreSQL text cannot hold a NUL
    team, rule = query.get("team") or None, query.get("rule") or None
    state = query.get("state", "live") or None
    findings = selectors.findings_visible(user=request.user, team=team, rule=rule, state=state)
    context = {
        "findings": findings[:500],
        "teams": teams_led(user=request.user),
        "rules": RULES,
        "states": ["live", *Finding.State.values],
        "selected": {"team": team or "", "rule": rule or "", "state": state or ""},
    }
    return render(request, "efficiency/findings.html", context)


@login_required
@require_POST
def finding_state(request: HttpRequest, pk: int) -> HttpResponse:
    if not selectors.findings_visible(user=request.user).filter(pk=pk).exists():
        raise Http404("No such finding.")
    try:
        if request.POST.get("state") == "dismissed":
            finding_dismiss(finding_id=pk, user=request.user, reason=request.POST.get("reason", ""))
        else:
            finding_acknowledge(finding_id=pk, user=request.user)
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
        "utilisation": 100 * sum(h.used_gpu_hours for h in hours) / capacity if capacity else None,
        "idle_gpu_hours": sum(h.idle_gpu_hours for h in hours),
        "target": settings.GOVERNANCE_CLUSTER_TARGET_UTIL_PERCENT,
        "top_jobs": selectors.cluster_top_jobs(user=request.user, cluster_id=cluster.pk),
        "days": CLUSTER_DAYS,
    }
    return render(request, "efficiency/cluster.html", context)
