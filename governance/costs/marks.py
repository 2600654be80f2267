"""What a change of terms, or the passing of time, leaves to re-price: marks for the worker (usage.PricingMark).

Only open days are marked: a closed month is priced under its frozen terms, so a term can never reach it.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

from django.conf import settings
from django.db.models import Max, Min
from django.utils import timezone

from governance.costs.ledger import DAY, day_start
from governance.costs.models import Charge, DeclaredCapacity, MonthClose
from governance.fleet.models import Cluster, Gpu
from governance.lib.enqueue import enqueue_on_commit
from governance.lib.months import Month
from governance.usage.models import Job, PricingMark

REPRICE_TASK = "costs.reprice"


def first_open_day() -> date | None:
    """The first day after the last closed month, or None when nothing is closed (every day is open)."""
    latest = MonthClose.objects.aggregate(m=Max("month"))["m"]
    return Month(latest.year, latest.month).end.date() if latest else None


def _days(first: date, last: date) -> list[date]:
    out, day = [], first
    while day <= last:
        out.append(day)
        day += DAY
    return out


# A change of terms re-prices at most this far back (open months older than this are not re-priced).
HORIZON = timedelta(days=400)


def _earliest_activity(clusters: list[int], now: datetime) -> date:
    """The first day anything could be charged on these clusters: a job, a GPU seen, declared capacity."""
    found = [
        Job.objects.filter(cluster_id__in=clusters).aggregate(m=Min("start_time"))["m"],
        Gpu.objects.filter(cluster_id__in=clusters).aggregate(m=Min("first_seen_at"))["m"],
        DeclaredCapacity.objects.filter(cluster_id__in=clusters).aggregate(m=Min("valid_from"))["m"],
    ]
    known = [m for m in found if m is not None]
    return max(min(known), now - HORIZON).date() if known else now.date()


def terms_changed(
    *, since: datetime | None, cluster_id: int | None, gpu_model: str | None, usage: bool = True,
    now: datetime | None = None,
) -> int:  # fmt: skip
    """Mark the open days a term dated `since` (None: all of them) affects, for one cluster or all, one GPU model
    or all; then re-price after commit. Returns how many marks were written."""
    now = now or timezone.now()
    opened = first_open_day()
    first = since.date() if since is not None else None
    if opened is not None:
        first = max(first, opened) if first else opened
    marks: list[PricingMark] = []
    if usage:
        rows = Charge.objects.filter(kind=Charge.Kind.USAGE)
        if first is not None:
            rows = rows.filter(day__gte=first)
        if cluster_id is not None:
            rows = rows.filter(cluster_id=cluster_id)
        if gpu_model is not None:
            rows = rows.filter(gpu_model=gpu_model)
        pairs = rows.values_list("job_id", "cluster_id", "day").distinct()
        marks.extend(PricingMark(job_id=j, cluster_id=c, day=d) for j, c, d in pairs.iterator(chunk_size=5000))
    clusters = [cluster_id] if cluster_id is not None else list(Cluster.objects.values_list("pk", flat=True))
    start = first if first is not None else _earliest_activity(clusters, now)
    start = max(start, (now - HORIZON).date())
    for day in _days(start, now.date()):
        marks.extend(PricingMark(job_id=None, cluster_id=c, day=day) for c in clusters)
    PricingMark.objects.bulk_create(marks, batch_size=5000)
    if marks:
        enqueue_on_commit(REPRICE_TASK)
    return len(marks)


def running_jobs_mark(*, now: datetime | None = None) -> int:
    """Running jobs are charged up to now: mark their day (and yesterday just after midnight). The capacity of
    every cluster's last few days moves with time too (a GPU that stops reporting counts until its grace period
    is over): mark those cluster-days."""
    now = now or timezone.now()
    days = [now.date()]
    if now - day_start(now.date()) < timedelta(minutes=30):
        days.append(now.date() - DAY)
    grace_days = settings.GOVERNANCE_GPU_GONE_AFTER_HOURS // 24 + 2
    cluster_days = [now.date() - timedelta(days=n) for n in range(grace_days)]
    running = Job.objects.filter(end_time__isnull=True, start_time__isnull=False, start_time__lt=now)
    marks = [
        PricingMark(job_id=pk, cluster_id=cluster_id, day=day)
        for pk, cluster_id in running.values_list("pk", "cluster_id").iterator(chunk_size=5000)
        for day in days
    ]
    clusters = Cluster.objects.values_list("pk", flat=True)
    marks.extend(PricingMark(job_id=None, cluster_id=c, day=d) for c in clusters for d in cluster_days)
    PricingMark.objects.bulk_create(marks, batch_size=5000)
    return len(marks)


def gpus_confirmed_mark(*, pks: list[int]) -> int:
    """Mark the open days from the first report of these GPUs, per cluster and model (see terms_changed)."""
    found = 0
    rows = Gpu.objects.filter(pk__in=pks).values("cluster_id", "model").annotate(since=Min("first_seen_at"))
    for r in rows.order_by():
        found += terms_changed(since=r["since"], cluster_id=r["cluster_id"], gpu_model=None)
    return found
