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
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Max, Q, Sum
from django.utils import timezone

from governance.costs import corrections
from governance.costs.commitment_rows import commitment_days_refresh, commitments_apply, job_days_widen
from governance.costs.contended import contended_rows
from governance.costs.contention import contended_days, inventory, shared_seen
from governance.costs.failures import Failed, job_day_failed, pricing_failures_record
from governance.costs.ledger import (
    DAY,
    Allocated,
    Capacity,
    HourUse,
    JobFacts,
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
from governance.costs.summaries import ledger_days_refresh
from governance.costs.terms import SHARE, TermsByMonth
from governance.fleet.models import Cluster
from governance.lib.enqueue import enqueue_on_commit
from governance.lib.run_spans import runs_of
from governance.usage.models import Job, JobGpuHour, PricingMark
from governance.usage.utilisation import cluster_hours_refresh

logger = logging.getLogger(__name__)

# A pass's fixed costs (the cluster-days it refreshes, the contention check of every job held on them) are paid per
# cluster-day, and marks are claimed day by day: a pass this large covers whole days of a large fleet, so the pace
# holds as the fleet grows (a backlog, a month loaded in arrears, is priced a day or more at a time). Small enough
# for a pass to stay well inside the task's time limit (TASK_TIME_LIMIT_S) on a busy machine.
CLAIM_LIMIT = 20_000
EVALUATE_TASK = "efficiency.evaluate_jobs"
CLAIM = """
DELETE FROM usage_pricingmark WHERE id IN (
    SELECT id FROM usage_pricingmark ORDER BY day, cluster_id, id LIMIT %s FOR UPDATE SKIP LOCKED
) RETURNING job_id, cluster_id, day
"""


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


def _claim(limit: int) -> list[tuple[int | None, int, date]]:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(CLAIM, [limit])
            return cursor.fetchall()
    marks = list(
        PricingMark.objects.order_by("day", "cluster_id", "id").values_list("id", "job_id", "cluster_id", "day")[:limit]
    )
    PricingMark.objects.filter(id__in=[m[0] for m in marks]).delete()
    return [m[1:] for m in marks]


def charges_reprice(
    *, now: datetime | None = None, limit: int = CLAIM_LIMIT, budget_s: float | None = None
) -> Repriced:
    """Re-price everything marked, a claim at a time, until no mark is left (marks others hold are skipped) or
    `budget_s` seconds have gone (then `more` says marks may be left). Marks are claimed oldest day first."""
    total = Repriced()
    started = time.monotonic()
    while True:
        if budget_s is not None and time.monotonic() - started > budget_s:
            total.more = True
            break
        with transaction.atomic():
            marks = _claim(limit)
            if not marks:
                break
            job_days: dict[int, set[date]] = defaultdict(set)
            cluster_days: set[tuple[int, date]] = set()
            for job_id, cluster_id, day in marks:
                if job_id is not None:
                    job_days[job_id].add(day)
                cluster_days.add((cluster_id, day))
            total += reprice(job_days=job_days, cluster_days=cluster_days, now=now)
        if len(marks) < limit:
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
    jobs = _jobs(job_days.keys())
    lock_jobs(sorted(jobs))
    rows: list[dict] = []
    hours = _hour_use(jobs, job_days)
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


def _billed_past_end(job_days: dict[int, set[date]]) -> None:
    """Add the days the ledger bills a job past its end (billed while it looked open, before its end arrived):
    priced again they bill nothing. Marks need not know the ledger to reach them."""
    if not job_days:
        return
    past = (
        Charge.objects.filter(kind=Charge.Kind.USAGE, job_id__in=list(job_days), job__end_time__isnull=False,
                              period_start__gte=F("job__end_time"))
        .values_list("job_id", "day")
        .distinct()
    )  # fmt: skip
    for pk, day in past:
        job_days[pk].add(day)


def _job_clusters(job_days: dict[int, set[date]]) -> set[int]:
    return set(Job.objects.filter(pk__in=list(job_days)).values_list("cluster_id", flat=True).distinct())


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


def _jobs(ids: Iterable[int]) -> dict[int, JobFacts]:
    ids = list(ids)
    if not ids:
        return {}
    profiles = dict(
        JobGpuHour.objects.filter(job_id__in=ids)
        .exclude(gpu__mig_profile="")
        .values("job_id")
        .annotate(profile=Max("gpu__mig_profile"))
        .values_list("job_id", "profile")
    )
    out = {}
    rows = Job.objects.filter(pk__in=ids).values_list(
        "pk", "external_id", "cluster_id", "cluster__name", "user_name", "gpus", "gpu_model", "start_time",
        "end_time", "project_id", "project__name", "project__team_id", "project__team__name", "source_token_id",
        "source_token__name", "runs",
    )  # fmt: skip
    for pk, ref, cid, cluster, user, gpus, model, start, end, pid, project, team_id, team, tid, tname, ran in rows:
        out[pk] = JobFacts(pk, ref, cid, cluster, user, gpus, model, start, end, pid, project or "", team_id,
                           team or "", profiles.get(pk, ""), tid, tname or "",
                           runs_of(ran, start, end) if ran else None)  # fmt: skip
    return out


def _hour_use(jobs: dict[int, JobFacts], job_days: dict[int, set[date]]) -> dict[tuple[int, date], list[HourUse]]:
    """Each job's rollups per hour, GPU model and MIG profile, for the days being priced."""
    out: dict[tuple[int, date], list[HourUse]] = defaultdict(list)
    days = [d for pk, ds in job_days.items() if pk in jobs for d in ds]
    if not days:
        return out
    rows = (
        JobGpuHour.objects.filter(
            job_id__in=list(jobs), hour__gte=day_start(min(days)), hour__lt=day_start(max(days)) + DAY
        )
        .values("job_id", "hour", "gpu__model", "gpu__mig_profile")
        .annotate(
            n=Count("id"),
            samples=Sum("samples"),
            idle=Sum("idle_samples"),
            sm=Sum("sm_sum"),
            power=Sum("power_sum"),
            power_samples=Sum("power_samples"),
            sm_samples=Sum("sm_samples"),
        )
        .order_by()
    )
    for r in rows:
        day = r["hour"].date()
        if day in job_days[r["job_id"]]:
            out[(r["job_id"], day)].append(
                HourUse(
                    r["hour"],
                    r["gpu__model"],
                    r["gpu__mig_profile"],
                    r["n"],
                    r["samples"] or 0,
                    r["idle"] or 0,
                    r["sm"] or 0.0,
                    r["power"] or 0.0,
                    r["power_samples"] or 0,
                    r["sm_samples"] or 0,
                )
            )
    by_key = {(pk, u.hour, u.model, u.profile): u for (pk, _), uses in out.items() for u in uses}
    for pk, hour, model, profile, weight in shared_seen(list(jobs), day_start(min(days)), day_start(max(days)) + DAY):
        if (use := by_key.get((pk, hour, model, profile))) is not None:
            use.shared.append(weight)
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
    months = {month_of(d).start.date() for d in days}
    teams = (
        Charge.objects.filter(kind=Charge.Kind.USAGE, cluster_id__in=clusters, month__in=months)
        .values("cluster_id", "month", "team_id", "team_name")
        .annotate(cost=Sum("cost"))
        .order_by()
    )
    month_teams: dict[tuple[int, date], dict] = defaultdict(lambda: defaultdict(Decimal))
    for r in teams:
        month_teams[(r["cluster_id"], r["month"])][(r["team_id"], r["team_name"])] += r["cost"]
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
