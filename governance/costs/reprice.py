"""Keeps the charge ledger current: re-prices the job-days and cluster-days that ingest, a change of a job or a
change of terms marked, and turns late usage for a closed month into corrections in the next open month.

One pass is one transaction: claim marks, take the locks (months shared, then jobs, then cluster-days, then the
closed months being corrected, each in key order), write the rows. Passes are idempotent: re-pricing a day twice
gives the same rows, so a mark claimed twice, or a pass retried after a failure, changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q, Sum
from django.utils import timezone

from governance.costs import corrections
from governance.costs.claims import marks_claim
from governance.costs.commitment_rows import commitment_days_refresh, commitments_apply, job_days_widen
from governance.costs.contended import contended_rows
from governance.costs.contention import contended_days, inventory
from governance.costs.failures import Failed, job_day_failed, pricing_failures_record
from governance.costs.job_lookup import job_clusters_of
from governance.costs.ledger import (
    DAY,
    Allocated,
    Capacity,
    day_capacity,
    day_start,
    job_day_rows,
    month_of,
    unallocated_rows,
)
from governance.costs.ledger_writes import WRITE_BATCH, rows_insert, usage_replace
from governance.costs.locks import lock_cluster_days, lock_jobs, lock_months
from governance.costs.models import CapacityDay, Charge
from governance.costs.overclaims import gpus_confirmation_refresh
from governance.costs.pass_inputs import hour_use_read, jobs_read
from governance.costs.summaries import ledger_days_refresh
from governance.costs.terms import SHARE, TermsByMonth
from governance.fleet.models import Cluster
from governance.lib.enqueue import enqueue_on_commit
from governance.usage.utilisation import cluster_hours_refresh

logger = logging.getLogger(__name__)

# A pass's fixed costs (the cluster-days it refreshes, the contention check of every job held on them) are paid per
# cluster-day, and marks are claimed by whole cluster-days (governance/costs/claims.py), settings.PRICING_CLAIM_MARKS
# at a time: a pass that large covers days of a large fleet, so the pace holds as the fleet grows (a backlog, a
# month loaded in arrears, is priced days at a time, and a long job is not priced again for each day). Small enough
# for a pass to stay well inside the task's time limit (TASK_TIME_LIMIT_S) on a busy machine.
EVALUATE_TASK = "efficiency.evaluate_jobs"


@dataclass
class Repriced:
    job_days: int = 0
    cluster_days: int = 0
    corrected_months: int = 0
    more: bool = False  # marks were left for another pass (the time budget ran out)

    def __iadd__(self, other: Repriced) -> Repriced:
        self.job_days += other.job_days
        self.cluster_days += other.cluster_days
        self.corrected_months += other.corrected_months
        return self


def charges_reprice(
    *, now: datetime | None = None, limit: int | None = None, budget_s: float | None = None
) -> Repriced:
    """Re-price everything marked, a claim of `limit` marks (settings.PRICING_CLAIM_MARKS) at a time, until no mark
    is left (marks others hold are skipped) or `budget_s` seconds have gone (then `more` says marks may be left).
    Marks are claimed oldest day first."""
    limit = limit or settings.PRICING_CLAIM_MARKS
    total = Repriced()
    started = time.monotonic()
    while True:
        if budget_s is not None and time.monotonic() - started > budget_s:
            total.more = True
            break
        with transaction.atomic():
            claim = marks_claim(limit)
            marks = claim.marks
            if not marks:
                break
            job_days: dict[int, set[date]] = defaultdict(set)
            cluster_days: set[tuple[int, date]] = set()
            for job_id, cluster_id, day in marks:
                if job_id is not None:
                    job_days[job_id].add(day)
                cluster_days.add((cluster_id, day))
            total += reprice(job_days=job_days, cluster_days=cluster_days, now=now)
        if not claim.more:
            break
    return total


def reprice(
    *, job_days: dict[int, set[date]], cluster_days: set[tuple[int, date]], now: datetime | None = None
) -> Repriced:
    """Re-price these job-days, then these and their clusters' days, then correct the closed months among them.
    Runs in the caller's transaction."""
    now = now or timezone.now()
    terms = TermsByMonth()
    _billed_past_end(job_days)
    job_days_widen(job_days, cluster_days, terms)
    gpus_confirmation_refresh(cluster_ids={c for c, _ in cluster_days} | _job_clusters(job_days), terms=terms.live(),
                              now=now)  # fmt: skip
    contended = contended_days(job_days, cluster_days, terms, now)
    months = {month_of(d) for days in job_days.values() for d in days} | {month_of(d) for _, d in cluster_days}
    lock_months(months, shared=True)
    jobs = jobs_read(job_days.keys())
    lock_jobs(sorted(jobs))
    rows: list[dict] = []
    hours = hour_use_read(jobs, job_days)
    failed: Failed = {}
    for pk, days in job_days.items():
        job = jobs.get(pk)
        if job is None:
            continue
        for day in sorted(days):
            if (job.cluster_id, day) in contended:
                continue
            month = month_of(day)
            until = now if not terms.closed(month) else month.end
            try:
                rows.extend(job_day_rows(job, day, until, hours.get((pk, day), []), terms.of(month)))
            except Exception as exc:
                job_day_failed(failed, pk, job.cluster_id, day, exc)
    rows.extend(contended_rows(contended, job_days, jobs, hours, terms, failed))
    # A job-day that failed keeps the rows it had (its last good price) until a retry succeeds.
    for pk, _, day in failed:
        job_days[pk].discard(day)
    pricing_failures_record(
        failed=failed, priced=[(pk, d) for pk, days in job_days.items() if pk in jobs for d in days], now=now
    )
    committed = commitments_apply(rows, jobs, hours, terms, now)
    usage_replace(job_days, rows, now)
    if jobs:
        # The findings' waste is priced from these rows: count it again once they are committed (by the task's
        # name: costs never imports efficiency).
        enqueue_on_commit(EVALUATE_TASK, sorted(jobs))
    touched = set(cluster_days) | {
        (jobs[pk].cluster_id, d) for pk, days in job_days.items() if pk in jobs for d in days
    }
    priced = {(row["cluster_id"], row["day"]) for row in rows}
    rows_insert(committed + commitment_days_refresh(touched, terms, now, priced), now)
    touched |= _shared_months(touched, terms, now)
    cluster_days_refresh(touched, now=now, terms=terms)
    closed = sorted({month_of(d) for _, d in touched if terms.closed(month_of(d))})
    for month in closed:
        corrections.corrections_refresh(corrected=month, now=now)
    ledger_days_refresh(touched)
    cluster_hours_refresh(touched)
    return Repriced(job_days=sum(len(d) for d in job_days.values()), cluster_days=len(touched),
                    corrected_months=len(closed))  # fmt: skip


# From the jobs that have ended, their usage rows that begin at or after the end: the day bound (implied, as a row
# begins within its day) lets the (job, day) index read only the days past each end.
PAST_END = """
SELECT DISTINCT c.job_id, c.day FROM usage_job j
JOIN costs_charge c ON c.job_id = j.id AND c.kind = 'usage' AND c.day >= (j.end_time AT TIME ZONE 'UTC')::date
 AND c.period_start >= j.end_time
WHERE j.id = ANY(%s::int8[]) AND j.end_time IS NOT NULL
"""


def _billed_past_end(job_days: dict[int, set[date]]) -> None:
    """Add the days the ledger bills a job past its end (billed while it looked open, before its end arrived):
    priced again they bill nothing. Marks need not know the ledger to reach them."""
    if not job_days:
        return
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(PAST_END, [list(job_days)])
            past = cursor.fetchall()
    else:
        past = list(
            Charge.objects.filter(kind=Charge.Kind.USAGE, job_id__in=list(job_days), job__end_time__isnull=False,
                                  period_start__gte=F("job__end_time"))
            .values_list("job_id", "day")
            .distinct()
        )  # fmt: skip
    for pk, day in past:
        job_days[pk].add(day)


def _job_clusters(job_days: dict[int, set[date]]) -> set[int]:
    return set(job_clusters_of(job_days).values())


def _shared_months(keys: set[tuple[int, date]], terms: TermsByMonth, now: datetime) -> set[tuple[int, date]]:
    """Under the share policy a team's share of every day follows its charges of the whole month: a change on
    one day of a shared cluster re-prices the cluster's other days of that month."""
    names = dict(Cluster.objects.filter(pk__in={c for c, _ in keys}).values_list("pk", "name"))
    out: set[tuple[int, date]] = set()
    for cid, month in {(c, month_of(d)) for c, d in keys}:
        month_terms = terms.of(month)
        last = min(month.end, now if not terms.closed(month) else month.end)
        day = month.start
        days = []
        while day < last:
            days.append(day.date())
            day += DAY
        if any(month_terms.policy(names.get(cid, ""), day_start(d) + DAY) == SHARE for d in days):
            out.update((cid, d) for d in days)
    return out


def cluster_days_refresh(keys: set[tuple[int, date]], *, now: datetime, terms: TermsByMonth) -> None:
    """Recompute the capacity and unallocated lines of these cluster-days from the usage rows written so far.
    A closed month's capacity stays as it was frozen; late usage only takes from its unallocated line."""
    if not keys:
        return
    keys = set(keys)
    lock_cluster_days(sorted(keys))
    clusters = dict(Cluster.objects.filter(pk__in={c for c, _ in keys}).values_list("pk", "name"))
    gpus = inventory(_counting_seen(keys, clusters, terms, now))
    days = sorted({d for _, d in keys})
    usage = (
        Charge.objects.filter(kind=Charge.Kind.USAGE, cluster_id__in=clusters, day__gte=days[0], day__lte=days[-1])
        .values("cluster_id", "day", "gpu_model")
        .annotate(hours=Sum("gpu_hours"), cost=Sum("list_cost"))  # capacity is at list: so is what jobs took of it
        .order_by()
    )
    allocated: dict[tuple[int, date], Allocated] = defaultdict(Allocated)
    for r in usage:
        if (r["cluster_id"], r["day"]) in keys:
            cap = allocated[(r["cluster_id"], r["day"])].by_model[r["gpu_model"]]
            cap.gpu_hours += r["hours"]
            cap.cost += r["cost"]
    month_teams = _month_teams(keys, clusters, terms)
    for cid, day in keys:
        allocated[(cid, day)].month_teams = month_teams[(cid, month_of(day).start.date())]
    frozen = _frozen_capacity(keys, terms)
    grace = timedelta(hours=settings.GOVERNANCE_GPU_GONE_AFTER_HOURS)
    rows: list[dict] = []
    fresh: list[CapacityDay] = []
    for cid, day in sorted(keys):
        if cid not in clusters:
            continue
        month = month_of(day)
        month_terms = terms.of(month)
        until = min(month.end, now)
        if terms.closed(month) and (cid, day) in frozen:
            capacity = dict(frozen[(cid, day)])
        else:
            capacity = day_capacity(clusters[cid], day, until, gpus[cid], month_terms, grace)
        if not month_terms.declares(clusters[cid], min(until, day_start(day) + DAY)):
            _cover_allocation(capacity, allocated[(cid, day)])
        upto = min(until, day_start(day) + DAY)
        fresh.extend(
            CapacityDay(cluster_id=cid, day=day, gpu_model=m, gpu_hours=c.gpu_hours, cost=c.cost, priced_until=upto)
            for m, c in capacity.items()
        )
        rows.extend(unallocated_rows(cid, clusters[cid], day, until, capacity, allocated[(cid, day)], month_terms))
    by_cluster: dict[int, set[date]] = defaultdict(set)
    for cid, day in keys:
        by_cluster[cid].add(day)
    stale = Q()
    for cid, cdays in by_cluster.items():
        stale |= Q(cluster_id=cid, day__in=cdays)
    Charge.objects.filter(stale, kind__in=[Charge.Kind.UNALLOCATED, Charge.Kind.SHARED]).delete()
    CapacityDay.objects.filter(stale).delete()
    CapacityDay.objects.bulk_create(fresh, batch_size=WRITE_BATCH)
    rows_insert(rows, now)


def _month_teams(
    keys: set[tuple[int, date]], clusters: dict[int, str], terms: TermsByMonth
) -> dict[tuple[int, date], dict]:
    """Per cluster and month, what each team was charged on it: the weights of the shares, read only for the
    clusters whose unallocated line is shared out on one of these days (a month's charges are a large read)."""
    out: dict[tuple[int, date], dict] = defaultdict(lambda: defaultdict(Decimal))
    shared = {
        (cid, month_of(day).start.date())
        for cid, day in keys
        if cid in clusters and terms.of(month_of(day)).policy(clusters[cid], day_start(day) + DAY) == SHARE
    }
    if not shared:
        return out
    teams = (
        Charge.objects.filter(kind=Charge.Kind.USAGE, cluster_id__in={c for c, _ in shared},
                              month__in={m for _, m in shared})
        .values("cluster_id", "month", "team_id", "team_name")
        .annotate(cost=Sum("cost"))
        .order_by()
    )  # fmt: skip
    for r in teams:
        if (r["cluster_id"], r["month"]) in shared:
            out[(r["cluster_id"], r["month"])][(r["team_id"], r["team_name"])] += r["cost"]
    return out


def _counting_seen(
    keys: set[tuple[int, date]], clusters: dict[int, str], terms: TermsByMonth, now: datetime
) -> set[int]:
    """The clusters whose capacity on one of these days is the GPUs their collectors saw (no declaration in force):
    only theirs are read (a fleet of 100,000 declared GPUs reads none)."""
    out = set()
    for cid, day in keys:
        if cid in clusters and cid not in out:
            month = month_of(day)
            end = min(month.end, now, day_start(day) + DAY)
            if not terms.of(month).declares(clusters[cid], end):
                out.add(cid)
    return out


def _cover_allocation(capacity: dict[str, Capacity], allocated: Allocated) -> None:
    """A cluster known only from its collectors has at least the GPUs its jobs held: a job that held GPUs before
    they first reported (or after the close froze the month's capacity) extends the day's capacity to cover it.
    Allocation (governance/costs/allocation.py) keeps what is billed within what exists; this is a guard for a closed
    month's frozen capacity. Declared capacity is authoritative: reconcile names a day billed beyond it."""
    for model, used in allocated.by_model.items():
        cap = capacity.get(model, Capacity())
        if used.gpu_hours > cap.gpu_hours or used.cost > cap.cost:
            capacity[model] = Capacity(max(cap.gpu_hours, used.gpu_hours), max(cap.cost, used.cost))


def _frozen_capacity(keys: set[tuple[int, date]], terms: TermsByMonth) -> dict[tuple[int, date], dict[str, Capacity]]:
    closed = {(c, d) for c, d in keys if terms.closed(month_of(d))}
    if not closed:
        return {}
    out: dict[tuple[int, date], dict[str, Capacity]] = defaultdict(dict)
    days = sorted(d for _, d in closed)
    rows = CapacityDay.objects.filter(cluster_id__in={c for c, _ in closed}, day__gte=days[0], day__lte=days[-1])
    for cid, day, model, hours, cost in rows.values_list("cluster_id", "day", "gpu_model", "gpu_hours", "cost"):
        if (cid, day) in closed:
            out[(cid, day)][model] = Capacity(hours, cost)
    return out
