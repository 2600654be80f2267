"""Reads for findings: job summaries from rollups (a fixed number of queries per call), findings as users see them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.conf import settings
from django.db.models import Count, F, Max, Q, QuerySet, Sum
from django.db.models.functions import NullIf
from django.utils import timezone

from governance.costs.models import Charge
from governance.costs.pricing import Rate, RateBook, mig_fraction, rate_at
from governance.costs.terms import rate_book
from governance.efficiency.models import LIVE_STATES, Finding
from governance.efficiency.placement import job_placements
from governance.efficiency.sharing import sharing_add
from governance.efficiency.summary import GpuSummary, HourStat, JobSummary
from governance.efficiency.waste import DayBill, bills_by_day
from governance.fleet.models import Gpu
from governance.org.models import User
from governance.org.selectors import job_visibility_filter
from governance.usage.models import GpuHour, Job, JobGpuHour

HOUR_FIELDS = (
    "hour", "samples", "idle_samples", "sm_sum", "sm_max", "sm_sq_sum", "mem_used_max", "mem_total_mib", "power_sum",
    "power_samples", "numa_mismatch_samples", "io_wait_sum", "io_wait_samples", "host_cpu_sum", "host_cpu_samples",
    "sm_samples", "tensor_sum", "tensor_samples", "dram_sum", "dram_samples", "nvlink_sum", "nvlink_samples",
    "pcie_sum", "pcie_samples", "job_sm_sum", "job_sm_samples",
)  # fmt: skip
GPU_FIELDS = ("gpu_id", "gpu__node__name", "gpu__index", "gpu__model", "gpu__memory_total_mib", "gpu__numa_node",
              "gpu__mig_profile")  # fmt: skip
CLUSTER_MEAN_WINDOW = timedelta(days=7)


def rate_current(
    *, cluster: str, gpu_model: str, at: datetime | None = None, book: RateBook | None = None
) -> Rate | None:
    """The rate in force for a GPU model on a cluster at `at` (now by default), by the chargeback's own rule:
    the cluster's card, else the organisation's, else the default (`*`) card; None without any."""
    book = book or rate_book()
    return rate_at(book.pricing(cluster, gpu_model).rates, at or timezone.now())


@dataclass(frozen=True)
class JobBill:
    """What the ledger bills one job, per day; the prices its findings' waste is counted at."""

    days: dict[date, DayBill]
    currency: str


def job_bills(*, job_ids: Iterable[int]) -> dict[int, JobBill]:
    """The jobs' usage rows of the ledger (every month, re-priced under each month's terms), per job and day."""
    rows: dict[int, list] = defaultdict(list)
    currency: dict[int, str] = {}
    for r in Charge.objects.filter(job_id__in=list(job_ids), kind=Charge.Kind.USAGE).values_list(
        "job_id", "day", "gpu_model", "mig_profile", "gpu_hours", "cost", "currency", "gpu_share"
    ):
        job_id, day, model, profile, hours, cost, cur, share = r
        # A share of one GPU is held like a MIG slice: its hour is one held hour, priced at the share of the rate.
        fraction = mig_fraction(model, profile) * (Fraction(share) if share else 1)
        rows[job_id].append((day, hours, cost, fraction))
        currency[job_id] = cur
    return {pk: JobBill(days=bills_by_day(r), currency=currency[pk]) for pk, r in rows.items()}


@dataclass(frozen=True)
class ClusterStats:
    """What the rules compare a job with on its cluster: the most GPUs one node holds and the mean SM over the
    last week. Read once per evaluation pass, whatever the number of jobs."""

    largest_node_gpus: dict[int, int]
    sm_means: dict[int, float]
    book: RateBook


def cluster_stats(*, cluster_ids: Iterable[int], now: datetime | None = None) -> ClusterStats:
    now = now or timezone.now()
    cluster_ids = set(cluster_ids)
    largest: dict[int, int] = defaultdict(int)
    for row in (
        Gpu.objects.filter(cluster_id__in=cluster_ids, mig_profile="")
        .values("cluster_id", "node_id")
        .annotate(n=Count("id"))
        .order_by()
    ):
        largest[row["cluster_id"]] = max(largest[row["cluster_id"]], row["n"])
    means = {
        row["gpu__cluster_id"]: row["sm"] / row["n"]
        for row in GpuHour.objects.filter(gpu__cluster_id__in=cluster_ids, hour__gte=now - CLUSTER_MEAN_WINDOW)
        .values("gpu__cluster_id")
        .annotate(sm=Sum("sm_sum"), n=Sum("sm_samples"))
        .order_by()
        if row["n"]
    }
    return ClusterStats(dict(largest), means, rate_book())


def job_clusters(*, job_ids: Iterable[int]) -> set[int]:
    return set(Job.objects.filter(pk__in=list(job_ids)).values_list("cluster_id", flat=True).distinct())


def job_summaries(
    *, job_ids: Iterable[int], now: datetime | None = None, stats: ClusterStats | None = None
) -> list[JobSummary]:
    """Summaries of the jobs that have started, in three queries whatever their number (three more for the
    clusters' statistics unless the caller read them once for its whole pass: `stats`; two more where some are on a
    share of one GPU, for its co-tenants: `efficiency.sharing`), and one per multi-GPU job on a node whose topology
    shows it could sit nearer (`efficiency.placement`)."""
    now = now or timezone.now()
    jobs = list(Job.objects.filter(pk__in=list(job_ids), start_time__isnull=False).select_related("cluster"))
    if not jobs:
        return []
    rows: dict[int, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in JobGpuHour.objects.filter(job_id__in=[j.pk for j in jobs]).values("job_id", *GPU_FIELDS, *HOUR_FIELDS):
        rows[row["job_id"]][row["gpu_id"]].append(row)
    stats = stats or cluster_stats(cluster_ids={j.cluster_id for j in jobs}, now=now)
    summaries = [
        _summary(job, rows[job.pk],
                 rate_current(cluster=job.cluster.name, gpu_model=job.gpu_model, at=now, book=stats.book),
                 stats.largest_node_gpus, stats.sm_means, now)
        for job in jobs
    ]  # fmt: skip
    summaries = sharing_add(summaries)
    placed = job_placements(summaries)
    return [replace(s, placement=placed[s.job_id]) if s.job_id in placed else s for s in summaries]


def _summary(job: Job, by_gpu: dict[int, list[dict]], card, largest, means, now: datetime) -> JobSummary:
    gpus = []
    for gpu_id, hours in sorted(by_gpu.items(), key=lambda kv: (kv[1][0]["gpu__node__name"], kv[1][0]["gpu__index"])):
        info = hours[0]
        gpus.append(
            GpuSummary(
                gpu_id=gpu_id,
                node=info["gpu__node__name"],
                index=info["gpu__index"],
                model=info["gpu__model"],
                memory_total_mib=info["gpu__memory_total_mib"],
                numa_node=info["gpu__numa_node"],
                mig_profile=info["gpu__mig_profile"],
                hours=tuple(sorted((HourStat(**{f: h[f] for f in HOUR_FIELDS}) for h in hours), key=lambda h: h.hour)),
            )
        )
    start = job.start_time
    assert start is not None  # job_summaries reads only the jobs that have started
    end = job.end_time
    running = end is None
    if end is None:
        last = max((h.hour for g in gpus for h in g.hours), default=start) + timedelta(hours=1)
        end = max(min(now, last), start)
    return JobSummary(
        job_id=job.pk,
        external_id=job.external_id,
        cluster=job.cluster.name,
        gpus_requested=None if job.gpus is None else float(job.gpus),  # a share of one GPU: 0.47
        gpu_model=job.gpu_model,
        start=start,
        end=end,
        running=running,
        labels=dict(job.labels or {}),
        gpus=tuple(gpus),
        rate=card.price_per_gpu_hour if card else None,
        currency=card.currency if card else settings.GOVERNANCE_DEFAULT_CURRENCY,
        cluster_sm_mean=means.get(job.cluster_id),
        largest_node_gpus=largest.get(job.cluster_id, 0),
    )


def findings_visible(
    *,
    user: User,
    team: str | None = None,
    rule: str | None = None,
    state: str | None = None,
    job: str | None = None,
    job_pk: int | None = None,
    mine: bool = False,
) -> QuerySet[Finding]:
    """Findings on the jobs the user may see, filtered; most money first. `job` is the scheduler's job id (on any
    cluster) or `cluster/id`; `job_pk` the database id; `mine` keeps the user's own jobs (scheduler user name =
    username)."""
    qs = Finding.objects.filter(job_visibility_filter(user=user, prefix="job__")).select_related(
        "job__cluster", "job__project__team"
    )
    if team:
        qs = qs.filter(job__project__team__slug=team)
    if rule:
        qs = qs.filter(rule=rule)
    if state == "live":
        qs = qs.filter(state__in=LIVE_STATES)
    elif state:
        qs = qs.filter(state=state)
    if mine:
        qs = qs.filter(job__user_name=user.username)
    if job:
        # A Kubernetes job id is itself `namespace/pod`, so `a/b` is either the id or cluster `a`'s job `b`.
        cluster, _, external_id = job.partition("/")
        named = Q(job__external_id=job)
        qs = qs.filter(named | Q(job__cluster__name=cluster, job__external_id=external_id) if external_id else named)
    if job_pk is not None:
        qs = qs.filter(job_id=job_pk)
    return qs.order_by("-waste", "-id")


def job_visible(*, user: User, pk: int) -> Job | None:
    return (
        Job.objects.filter(job_visibility_filter(user=user), pk=pk).select_related("cluster", "project__team").first()
    )


def job_gpu_timeline(*, job: Job) -> list[Mapping[str, Any]]:
    """Per GPU and hour: mean SM, peak memory (MiB) and mean power, from the job's rollups; on a shared GPU split by
    process, the job's own SM too (job_sm_sum over job_sm_samples)."""
    return list(
        JobGpuHour.objects.filter(job=job)
        .order_by("gpu__node__name", "gpu__index", "hour")
        .values(
            "hour",
            "samples",
            "sm_samples",
            "sm_sum",
            "mem_used_max",
            "power_sum",
            "power_samples",
            "gpu__node__name",
            "gpu__index",
            "job_sm_sum",
            "job_sm_samples",
        )
    )


def cluster_hours(*, cluster_id: int, start: datetime, end: datetime) -> list[Mapping[str, Any]]:
    """Per hour: GPUs reporting, utilisation-weighted GPU-hours and idle GPU-hours, from GpuHour."""
    rows = (
        GpuHour.objects.filter(gpu__cluster_id=cluster_id, hour__gte=start, hour__lt=end, samples__gt=0)
        .values("hour")
        .annotate(
            gpus=Count("gpu_id"),
            used=Sum(F("sm_sum") / NullIf(F("sm_samples"), 0) / 100.0),
            idle=Sum(F("idle_samples") * 1.0 / F("samples")),
        )
        .order_by("hour")
    )
    return list(rows)


def cluster_utilisation(*, cluster_id: int, start: datetime, end: datetime) -> float | None:
    """Effective utilisation over a window: utilisation-weighted GPU-hours / capacity GPU-hours (0-100)."""
    hours = cluster_hours(cluster_id=cluster_id, start=start, end=end)
    capacity = sum(h["gpus"] for h in hours)
    return 100 * sum(h["used"] for h in hours) / capacity if capacity else None


def cluster_top_jobs(*, user: User, cluster_id: int, limit: int = 10) -> list[Mapping[str, Any]]:
    return list(
        Finding.objects.filter(job_visibility_filter(user=user, prefix="job__"), job__cluster_id=cluster_id)
        .filter(state__in=LIVE_STATES)
        .values("job_id", "job__external_id", "job__user_name", "currency")
        .annotate(total=Sum("waste"), findings=Count("id"), biggest=Max("waste"))
        .order_by("-total")[:limit]
    )


def job_cost_so_far(*, job: Job) -> tuple[Decimal, str] | None:
    """What the ledger charges the job so far (every month, re-priced under each month's terms); None if nothing."""
    totals = Charge.objects.filter(job=job, kind=Charge.Kind.USAGE).aggregate(
        cost=Sum("cost"), currency=Max("currency")
    )
    if totals["cost"] is None:
        return None
    return totals["cost"], totals["currency"]
