"""Pricing by the month: what a close prices before it freezes a month (only what is left to price, never the whole
month again), and the backfill that prices a whole month in one pass (`manage.py reprice MONTH`).

The worker keeps the ledger current, so a month that ended has little or nothing left: the marks still pending
for its days, the cluster-days last priced before they ended, and the job-days of jobs that held GPUs past the
moment their rows were priced. Those are priced here, the month is checked against its capacity (team charges +
unallocated = capacity x rate, per cluster), and only a month that fails the check is re-priced in full (the
backfill path of `manage.py reprice`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime

from django.db import connection
from django.db.models import F, Q

from governance.costs.ledger import DAY, day_start
from governance.costs.models import CapacityDay, Charge
from governance.costs.reprice import Repriced, reprice
from governance.costs.selectors import reconcile
from governance.fleet.models import Cluster
from governance.lib.months import Month
from governance.usage.models import Job, JobGpuHour, PricingMark

CLAIM_MONTH = """
DELETE FROM usage_pricingmark WHERE id IN (
    SELECT id FROM usage_pricingmark WHERE day >= %s AND day < %s FOR UPDATE SKIP LOCKED
) RETURNING job_id, cluster_id, day
"""


@dataclass
class Settled:
    """What a close priced: the marks it found, the days priced short of their end, and whether it had to
    re-price the whole month because the month did not add up."""

    marks: int
    stale_days: int
    repriced: Repriced
    full: bool


def _claim_month(month: Month) -> list[tuple[int | None, int, date]]:
    first, end = month.start.date(), month.end.date()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(CLAIM_MONTH, [first, end])
            return cursor.fetchall()
    marks = PricingMark.objects.filter(day__gte=first, day__lt=end)
    found: list[tuple[int | None, int, date]] = list(marks.values_list("job_id", "cluster_id", "day"))
    marks.delete()
    return found


def _days(month: Month) -> list[date]:
    out, moment = [], month.start
    while moment < month.end:
        out.append(moment.date())
        moment += DAY
    return out


def _short_cluster_days(month: Month) -> set[tuple[int, date]]:
    """Cluster-days with no capacity priced, or priced before the day ended."""
    days = _days(month)
    whole = {
        (cid, day)
        for cid, day, until in CapacityDay.objects.filter(day__gte=days[0], day__lte=days[-1]).values_list(
            "cluster_id", "day", "priced_until"
        )
        if until >= day_start(day) + DAY
    }
    clusters = Cluster.objects.values_list("pk", flat=True)
    return {(cid, day) for cid in clusters for day in days} - whole


def _short_job_days(month: Month) -> dict[int, set[date]]:
    """Job-days whose row stops before the day's end while the job held its GPUs on (priced while it ran)."""
    rows = (
        Charge.objects.filter(kind=Charge.Kind.USAGE, month=month.start.date(), job__isnull=False)
        .filter(Q(job__end_time__isnull=True) | Q(job__end_time__gt=F("period_end")))
        .values_list("job_id", "day", "period_end")
    )
    out: dict[int, set[date]] = defaultdict(set)
    for pk, day, end in rows.iterator(chunk_size=5000):
        if end < day_start(day) + DAY:
            out[pk].add(day)
    return out


def month_settle(*, month: Month, now: datetime) -> Settled:
    """Price what a month has left (see the module), in the caller's transaction (the close's)."""
    job_days = _short_job_days(month)
    cluster_days = _short_cluster_days(month)
    stale = sum(len(d) for d in job_days.values()) + len(cluster_days)
    marks = _claim_month(month)
    for job_id, cluster_id, day in marks:
        if job_id is not None:
            job_days[job_id].add(day)
        cluster_days.add((cluster_id, day))
    done = reprice(job_days=dict(job_days), cluster_days=cluster_days, now=now)
    if all(not check.off_by for check in reconcile(month=month).clusters):
        return Settled(marks=len(marks), stale_days=stale, repriced=done, full=False)
    done += month_reprice(month=month, now=now)
    return Settled(marks=len(marks), stale_days=stale, repriced=done, full=True)


def month_marks(month: Month) -> tuple[dict[int, set[date]], set[tuple[int, date]]]:
    """Every job-day and cluster-day of a month: what a full re-pricing (a close, `manage.py reprice`) covers."""
    days = []
    moment = month.start
    while moment < month.end:
        days.append(moment.date())
        moment += DAY
    held = Job.objects.filter(start_time__lt=month.end).filter(Q(end_time__isnull=True) | Q(end_time__gt=month.start))
    ids = set(held.values_list("pk", flat=True))
    ids |= set(
        JobGpuHour.objects.filter(hour__gte=month.start, hour__lt=month.end).values_list("job_id", flat=True).distinct()
    )
    job_days = {pk: set(days) for pk in ids}
    clusters = set(Cluster.objects.values_list("pk", flat=True))
    return job_days, {(c, d) for c in clusters for d in days}


def month_reprice(*, month: Month, now: datetime | None = None) -> Repriced:
    """Re-price a whole month now (in the caller's transaction)."""
    job_days, cluster_days = month_marks(month)
    return reprice(job_days=job_days, cluster_days=cluster_days, now=now)
