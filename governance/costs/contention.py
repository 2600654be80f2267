"""Which cluster-days a pricing pass must price together, and their inputs (governance/costs/allocation.py).

A job-day is priced alone, as cheaply as ever, while its cluster-day is uncontended: in every hour what its jobs
could claim at most (declared counts, and each GPU seen with jobs that declare no count) fits in the GPUs the
cluster has that samples do not show free, no GPU is unconfirmed, and no over-claim was recorded for the day.
Otherwise every job of the cluster-day is priced together and allocation decides who holds each GPU-hour. A GPU
seen with several jobs in an hour is no contention by itself: each job holds its part of it (allocation.seen_part),
so together they hold at most the GPU; it is where the shares its jobs declare pass it over the time each held it,
or where jobs of declared and of unknown share meet on it (_gpus_overshared).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, F, FloatField, Max, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Cast

from governance.costs.allocation import (
    GpuSeen,
    Holder,
    Seen,
    capacity_by_hour,
    capacity_intervals,
    edge_part,
    hours_between,
    seen_weight,
    window,
)
from governance.costs.job_lookup import job_clusters_of
from governance.costs.ledger import DAY, HOUR, day_start, month_of
from governance.costs.models import Charge, OverClaim
from governance.costs.terms import TermsByMonth
from governance.fleet.models import Cluster, Gpu
from governance.usage.models import GpuHour, Job, JobGpuHour

# Float sums of the free share are compared with a little slack: a false "contended" only costs time.
SLACK = Decimal("0.000001")


@dataclass
class DayInputs:
    """What allocation needs of a contended cluster-day besides its jobs: GPU-hours the cluster has per model and
    hour, and those samples show held by no job."""

    cluster: str
    first: datetime
    last: datetime
    capacity: dict[str, dict[datetime, Decimal]] = field(default_factory=dict)
    free: dict[tuple[str, datetime], Decimal] = field(default_factory=dict)
    # (free GPU-hours samples cannot vouch for, time between samples): allocation.vouched_free
    blind: dict[tuple[str, datetime], tuple[Decimal, Decimal]] = field(default_factory=dict)


def _until(terms: TermsByMonth, day: date, now: datetime) -> datetime:
    month = month_of(day)
    return month.end if terms.closed(month) else now


def inventory(cluster_ids: set[int]) -> dict[int, list[GpuSeen]]:
    """The confirmed GPUs of these clusters: a GPU not confirmed is not capacity."""
    out: dict[int, list[GpuSeen]] = defaultdict(list)
    rows = Gpu.objects.filter(cluster_id__in=cluster_ids, unconfirmed=False).values_list(
        "cluster_id", "model", "mig_profile", "first_seen_at", "last_seen_at"
    )
    for cid, model, profile, first, last in rows:
        out[cid].append(GpuSeen(model, profile, first, last))
    return out


def contended_days(
    job_days: dict[int, set[date]], cluster_days: set[tuple[int, date]], terms: TermsByMonth, now: datetime
) -> dict[tuple[int, date], DayInputs]:
    """The contended cluster-days among those this pass touches, with their inputs; adds every job of each of them
    to `job_days`."""
    keys = set(cluster_days)
    for pk, cid in job_clusters_of(job_days).items():
        keys.update((cid, d) for d in job_days[pk])
    if not keys:
        return {}
    names = dict(Cluster.objects.filter(pk__in={c for c, _ in keys}).values_list("pk", "name"))
    days = sorted({d for _, d in keys})
    lo, hi = day_start(days[0]), day_start(days[-1]) + DAY
    in_range = Q(hour__gte=lo, hour__lt=hi, gpu__cluster_id__in=names)
    inputs = _inputs(keys, names, terms, now)
    undeclared: Claims = defaultdict(lambda: defaultdict(Decimal))
    flagged: set[tuple[int, date]] = set()
    per_hour = (
        JobGpuHour.objects.filter(in_range)
        .values("gpu__cluster_id", "gpu__model", "hour")
        .annotate(
            undeclared=Count("gpu_id", distinct=True, filter=Q(job__gpus__isnull=True) | Q(job__gpus=0)),
            unconfirmed=Count("id", filter=Q(gpu__unconfirmed=True)),
        )
        .order_by()
    )
    for r in per_hour:
        key = (r["gpu__cluster_id"], r["hour"].date())
        if key not in inputs:
            continue
        if r["unconfirmed"]:
            flagged.add(key)
        undeclared[key][(r["gpu__model"], r["hour"])] += r["undeclared"]
    flagged |= {k for k in _gpus_overshared(in_range) if k in inputs}
    flagged |= {k for k in OverClaim.objects.filter(cluster_id__in=names, day__in=days).values_list(
        "cluster_id", "day").distinct() if k in inputs}  # fmt: skip
    unsure = [k for k in inputs if k not in flagged and not _within_capacity(inputs[k], _declared_gpus(k),
                                                                               undeclared[k])]  # fmt: skip
    flagged |= _over_capacity(unsure, inputs, undeclared)
    contended = {k: inputs[k] for k in flagged}
    _widen(job_days, contended)
    return contended


Claims = dict[tuple[int, date], dict[tuple[str, datetime], Decimal]]


def _declared(cluster_ids: set[int], lo: datetime, hi: datetime) -> QuerySet[Job]:
    """The jobs of these clusters that declare a count and held their GPUs at some time from lo to hi."""
    return Job.objects.filter(cluster_id__in=cluster_ids, gpus__gt=0, start_time__lt=hi).filter(
        Q(end_time__isnull=True) | Q(end_time__gt=lo)
    )


def _declared_gpus(key: tuple[int, date]) -> dict[str, Decimal]:
    """Per model, the GPUs the jobs of a cluster-day declare together: what they could claim of any hour at most."""
    first = day_start(key[1])
    rows = _declared({key[0]}, first, first + DAY).values("gpu_model").annotate(n=Sum("gpus")).order_by()
    return {r["gpu_model"]: Decimal(r["n"]) for r in rows}


def _within_capacity(day: DayInputs, declared: dict[str, Decimal], undeclared: dict[tuple[str, datetime], Decimal]
                     ) -> bool:  # fmt: skip
    """Whether no hour of the day can be over-claimed even if every declared job held its GPUs all of it: one grouped
    read, so a day whose claims fit (the common case, at any fleet size) reads no job row."""
    models = set(declared) | {m for m, _ in undeclared}
    hour = day.first
    while hour < day.last:
        whole = hours_between(max(hour, day.first), min(hour + HOUR, day.last))
        for model in models:
            claimed = declared.get(model, Decimal(0)) * whole + undeclared.get((model, hour), Decimal(0))
            if claimed > _room(day, model, hour, Decimal(0)) + SLACK:
                return False
        hour += HOUR
    return True


def _room(day: DayInputs, model: str, hour: datetime, brief: Decimal) -> Decimal:
    unsure = day.blind.get((model, hour), (Decimal(0), Decimal(0)))[0]
    free = max(day.free.get((model, hour), Decimal(0)) - min(unsure, brief), Decimal(0))
    return day.capacity.get(model, {}).get(hour, Decimal(0)) - free


def _over_capacity(keys: list[tuple[int, date]], inputs: dict[tuple[int, date], DayInputs], undeclared: Claims
                   ) -> set[tuple[int, date]]:  # fmt: skip
    """Of these cluster-days, those where in some hour what the jobs claim passes the GPUs not seen free, hour by
    hour and job by job (allocation.vouched_free: a brief claim between samples may take a GPU seen free)."""
    if not keys:
        return set()
    days = sorted({d for _, d in keys})
    claims: Claims = defaultdict(lambda: defaultdict(Decimal))
    brief: Claims = defaultdict(lambda: defaultdict(Decimal))
    lo, hi = day_start(days[0]), day_start(days[-1]) + DAY
    rows = _declared({c for c, _ in keys}, lo, hi).values_list("cluster_id", "gpu_model", "gpus", "start_time",
                                                                "end_time")  # fmt: skip
    wanted = set(keys)
    for cid, model, gpus, start, end in rows:
        holder = Holder(0, gpus, model, "", start, end)
        upto = (end or hi).date()
        for day in days:
            if start is not None and start.date() <= day <= upto and (cid, day) in wanted:
                _add_declared(claims[(cid, day)], brief[(cid, day)], holder, inputs[(cid, day)])
    out = set()
    for key in keys:
        found = inputs[key]
        for (model, hour), claimed in claims[key].items():
            claimed += undeclared[key].get((model, hour), Decimal(0))
            if claimed > _room(found, model, hour, brief[key].get((model, hour), Decimal(0))) + SLACK:
                out.add(key)
                break
        else:
            for (model, hour), claimed in undeclared[key].items():
                if claimed > _room(found, model, hour, Decimal(0)) + SLACK:
                    out.add(key)
                    break
    return out


def _gpus_overshared(in_range: Q) -> set[tuple[int, date]]:
    """The cluster-days of GPU-hours seen with several jobs that allocation must share out: jobs of declared shares
    whose shares over the time each held the GPU pass the GPU (two jobs each declaring it whole at once), or jobs of
    declared and of unknown share together (the unknown ones get what the declared leave). A GPU handed from one job
    to the next is neither."""
    rows = (
        JobGpuHour.objects.filter(in_range)
        .annotate(allocated=allocated_samples())
        .filter(samples__lt=F("allocated"))
        .values_list("gpu__cluster_id", "gpu_id", "hour", "job__gpus", "job__start_time", "job__end_time")
    )
    by_gpu: dict[tuple[int, int, datetime], list[tuple[Decimal | None, datetime | None, datetime | None]]] = (
        defaultdict(list)
    )
    for cid, gpu, hour, gpus, start, end in rows:
        by_gpu[(cid, gpu, hour)].append((gpus, start, end))
    out: set[tuple[int, date]] = set()
    for (cid, _, hour), jobs in by_gpu.items():
        declared = [(gpus, start, end) for gpus, start, end in jobs if gpus and start is not None]
        if declared and len(declared) < len(jobs):
            out.add((cid, hour.date()))
            continue
        held = sum(
            (
                hours_between(max(hour, start), min(hour + HOUR, end or hour + HOUR)) * min(Decimal(1), gpus)
                for gpus, start, end in declared
            ),
            Decimal(0),
        )
        if held > 1 + SLACK:
            out.add((cid, hour.date()))
    return out


def _add_declared(
    claims: dict[tuple[str, datetime], Decimal], brief: dict[tuple[str, datetime], Decimal], holder: Holder,
    day: DayInputs,
) -> None:  # fmt: skip
    hour = day.first
    while hour < day.last:
        span = window(holder, hour, day.first, day.last)
        if span is not None:
            claimed = hours_between(*span) * holder.gpus  # type: ignore[operator]
            claims[(holder.model, hour)] += claimed
            gap = day.blind.get((holder.model, hour), (Decimal(0), Decimal(0)))[1]
            brief[(holder.model, hour)] += edge_part(claimed, span[0], span[1], hour, gap)
        hour += timedelta(hours=1)


def _inputs(
    keys: set[tuple[int, date]], names: dict[int, str], terms: TermsByMonth, now: datetime
) -> dict[tuple[int, date], DayInputs]:
    grace = timedelta(hours=settings.GOVERNANCE_GPU_GONE_AFTER_HOURS)
    spans = {}
    for cid, day in keys:
        if cid in names:
            until = _until(terms, day, now)
            first = day_start(day)
            if min(first + DAY, until) > first:
                spans[(cid, day)] = (first, min(first + DAY, until), until)
    # Only a cluster that declares no capacity then counts the GPUs seen: a fleet of declared GPUs reads none.
    gpus = inventory({c for (c, d), (_, last, _) in spans.items()
                      if not terms.of(month_of(d)).declares(names[c], last)})  # fmt: skip
    out: dict[tuple[int, date], DayInputs] = {}
    for (cid, day), (first, last, until) in spans.items():
        intervals = capacity_intervals(names[cid], first, last, until, gpus[cid], terms.of(month_of(day)), grace)
        out[(cid, day)] = DayInputs(names[cid], first, last, capacity_by_hour(intervals))
    if not out:
        return out
    days = sorted({d for _, d in out})
    share = Cast(F("samples") - F("allocated_samples"), FloatField()) / Cast(F("samples"), FloatField())
    interval = Value(1.0, FloatField()) / Cast(F("samples"), FloatField())
    free = (
        GpuHour.objects.filter(
            gpu__cluster_id__in={c for c, _ in out},
            gpu__unconfirmed=False,
            hour__gte=day_start(days[0]),
            hour__lt=day_start(days[-1]) + DAY,
            allocated_samples__lt=F("samples"),
        )
        .values("gpu__cluster_id", "gpu__model", "hour")
        .annotate(free=Sum(share), blind=Sum(interval), gap=Max(interval))
        .order_by()
    )
    for r in free:
        key = (r["gpu__cluster_id"], r["hour"].date())
        if key in out:
            at = (r["gpu__model"], r["hour"])
            out[key].free[at] = Decimal(repr(r["free"]))
            out[key].blind[at] = (Decimal(repr(r["blind"])), Decimal(repr(r["gap"])))
    return out


def _widen(job_days: dict[int, set[date]], contended: dict[tuple[int, date], DayInputs]) -> None:
    """Add every job of the contended cluster-days: declared ones held then, those seen then, those priced then."""
    for (cid, day), inputs in contended.items():
        held = Job.objects.filter(cluster_id=cid, start_time__lt=inputs.last).filter(
            Q(end_time__isnull=True) | Q(end_time__gt=inputs.first)
        )
        ids = set(held.values_list("pk", flat=True))
        seen = JobGpuHour.objects.filter(gpu__cluster_id=cid, hour__gte=inputs.first, hour__lt=inputs.first + DAY)
        ids |= set(seen.values_list("job_id", flat=True).distinct())
        priced = Charge.objects.filter(kind=Charge.Kind.USAGE, cluster_id=cid, day=day, job_id__isnull=False)
        ids |= set(priced.values_list("job_id", flat=True))
        for pk in ids:
            job_days.setdefault(pk, set()).add(day)


def allocated_samples() -> Subquery:
    """For a rollup (a job on a GPU in an hour): the samples of every job seen on that GPU in that hour."""
    of_gpu_hour = GpuHour.objects.filter(gpu_id=OuterRef("gpu_id"), hour=OuterRef("hour")).values("allocated_samples")
    return Subquery(of_gpu_hour[:1])


def day_seen(cid: int, inputs: DayInputs) -> list[Seen]:
    """Every job's rollup on every GPU of a contended cluster-day, with its weight on the GPU-hour."""
    rows = JobGpuHour.objects.filter(gpu__cluster_id=cid, hour__gte=inputs.first, hour__lt=inputs.first + DAY).annotate(
        allocated=allocated_samples()
    )
    return [
        Seen(job, gpu, hour, model, profile, unconfirmed, seen_weight(samples, allocated))
        for job, gpu, hour, model, profile, unconfirmed, samples, allocated in rows.values_list(
            "job_id", "gpu_id", "hour", "gpu__model", "gpu__mig_profile", "gpu__unconfirmed", "samples", "allocated"
        )
    ]


def shared_seen(job_ids: list[int], lo: datetime, hi: datetime) -> list[tuple[int, datetime, str, str, Decimal]]:
    """(job, hour, model, profile, weight) of these jobs' rollups from lo to hi on GPUs other jobs were seen on in
    the same hour."""
    rows = JobGpuHour.objects.filter(job_id__in=job_ids, hour__gte=lo, hour__lt=hi).annotate(
        allocated=allocated_samples()
    )
    shared = rows.filter(samples__lt=F("allocated")).values_list(
        "job_id", "hour", "gpu__model", "gpu__mig_profile", "samples", "allocated"
    )
    return [(job, hour, model, profile, seen_weight(n, total)) for job, hour, model, profile, n, total in shared]
