"""The month's charges, computed from jobs, hourly rollups, rate cards and capacity; never from raw samples.

One row per job per day (streamed: two ordered queries merged in Python, so memory stays flat), then one
unallocated row per cluster and GPU model, or, under the `share` policy, one share per team.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from django.conf import settings
from django.db.models import Max, Q, Sum
from django.db.models.functions import TruncDay

from governance.costs.models import DEFAULT_MODEL, DeclaredCapacity, RateCard
from governance.costs.pricing import Card, Rate, RateBook, gpu_hours, mig_fraction, price_interval, scale
from governance.fleet.models import Cluster, Gpu
from governance.lib.months import Month
from governance.usage.models import Job, JobGpuHour

UNATTRIBUTED = "(unattributed)"
UNALLOCATED = "(unallocated)"
ZERO = Decimal(0)
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
MIXED_CURRENCIES = "Rate cards use more than one currency ({found}); a statement is in one currency."


class MixedCurrencies(ValueError):
    pass


@dataclass(slots=True)
class Charge:
    """One line of a statement: a job's day, a cluster's unallocated capacity, a team's share of it, or a correction."""

    kind: str  # usage | unallocated | shared | adjustment
    period_start: datetime
    period_end: datetime
    cluster: str
    team_id: int | None
    team: str
    project: str
    job_ref: str
    user: str
    gpu_model: str
    mig_profile: str
    gpu_hours: Decimal
    used_gpu_hours: Decimal
    idle_gpu_hours: Decimal
    cost: Decimal
    idle_cost: Decimal
    energy_kwh: Decimal
    energy_cost: Decimal
    currency: str
    at_default_rate: bool
    corrects: Month | None = None


def rate_book() -> RateBook:
    cards = [
        Card(c.gpu_model, c.cluster.name if c.cluster else None, Rate(c.valid_from, c.price_per_gpu_hour, c.currency),
             c.energy_price_per_kwh)
        for c in RateCard.objects.select_related("cluster").order_by("valid_from")
    ]  # fmt: skip
    return RateBook(cards, default_model=DEFAULT_MODEL)


def book_currency(book: RateBook) -> str:
    found = book.currencies()
    if len(found) > 1:
        raise MixedCurrencies(MIXED_CURRENCIES.format(found=", ".join(sorted(found))))
    return found.pop() if found else settings.GOVERNANCE_DEFAULT_CURRENCY


def _period_end(month: Month, now: datetime) -> datetime:
    return min(month.end, max(now, month.start))


def _jobs(month: Month, now: datetime):
    return (
        Job.objects.filter(start_time__lt=min(month.end, now), gpus__gt=0)
        .filter(Q(end_time__isnull=True) | Q(end_time__gt=month.start))
        .order_by("id")
        .values_list(
            "id",
            "external_id",
            "cluster__name",
            "user_name",
            "gpus",
            "gpu_model",
            "start_time",
            "end_time",
            "project__name",
            "project__team_id",
            "project__team__name",
        )
    )


def _day_rollups(month: Month):
    return (
        JobGpuHour.objects.filter(hour__gte=month.start, hour__lt=month.end)
        .annotate(day=TruncDay("hour", tzinfo=UTC))
        .values("job_id", "day")
        .annotate(
            samples=Sum("samples"),
            idle=Sum("idle_samples"),
            sm=Sum("sm_sum"),
            power=Sum("power_sum"),
            power_samples=Sum("power_samples"),
        )
        .order_by("job_id", "day")
        .values_list("job_id", "day", "samples", "idle", "sm", "power", "power_samples")
    )


def _mig_profiles(month: Month) -> dict[int, str]:
    rows = (
        JobGpuHour.objects.filter(hour__gte=month.start, hour__lt=month.end)
        .exclude(gpu__mig_profile="")
        .values("job_id")
        .annotate(profile=Max("gpu__mig_profile"))
        .values_list("job_id", "profile")
    )
    return dict(rows)


def _share(part: float | int | None, whole: float | int | None) -> Decimal:
    if not whole:
        return ZERO
    return Decimal(part or 0) / Decimal(whole)


def _days(start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime, datetime]]:
    day = start.replace(hour=0, minute=0, second=0, microsecond=0)
    while day < end:
        yield day, max(start, day), min(end, day + DAY)
        day += DAY


def job_day_charges(*, month: Month, now: datetime, book: RateBook, currency: str) -> Iterator[Charge]:
    """Allocated GPU-hours x the rate in force, per job and day; used and idle shares from the hourly rollups."""
    migs = _mig_profiles(month)
    first, last = month.start, min(month.end, max(now, month.start))
    rollups = iter(_day_rollups(month).iterator(chunk_size=5000))
    pending = next(rollups, None)
    for job in _jobs(month, now).iterator(chunk_size=2000):
        pk, ref, cluster, user, gpus, model, started, ended, project, team_id, team = job
        days: dict[datetime, tuple] = {}
        while pending is not None and pending[0] <= pk:
            if pending[0] == pk:
                days[pending[1]] = pending
            pending = next(rollups, None)
        start, end = max(started, first), min(ended or now, last)
        if end <= start:
            continue
        profile = migs.get(pk, "")
        fraction = mig_fraction(model, profile)
        pricing = book.pricing(cluster, model)
        for day, lo, hi in _days(start, end):
            priced = price_interval(lo, hi, gpus, pricing.rates)
            hours, cost = scale(priced.gpu_hours, fraction), scale(priced.cost, fraction)
            agg = days.get(day)
            used = _share(agg[4], agg[2]) / 100 if agg else ZERO
            idle = _share(agg[3], agg[2]) if agg else ZERO
            kwh = _share(agg[5], agg[6]) / 1000 * hours if agg else ZERO
            yield Charge(
                kind="usage", period_start=lo, period_end=hi, cluster=cluster, team_id=team_id,
                team=team or UNATTRIBUTED, project=project or "", job_ref=ref, user=user, gpu_model=model,
                mig_profile=profile, gpu_hours=hours, used_gpu_hours=hours * used, idle_gpu_hours=hours * idle,
                cost=cost, idle_cost=cost * idle, energy_kwh=kwh,
                energy_cost=kwh * (pricing.energy_price_per_kwh or ZERO), currency=currency,
                at_default_rate=pricing.at_default,
            )  # fmt: skip


@dataclass
class Capacity:
    gpu_hours: Decimal = ZERO
    cost: Decimal = ZERO


def _declared_intervals(
    month: Month, end: datetime
) -> tuple[set[str], list[tuple[str, str, Fraction, datetime, datetime]]]:
    rows = DeclaredCapacity.objects.filter(valid_from__lt=end).order_by("cluster__name", "gpu_model", "valid_from")
    by_key: dict[tuple[str, str], list[tuple[datetime, int]]] = defaultdict(list)
    for cluster, model, valid_from, count in rows.values_list("cluster__name", "gpu_model", "valid_from", "count"):
        by_key[(cluster, model)].append((valid_from, count))
    out = []
    for (cluster, model), steps in by_key.items():
        for i, (valid_from, count) in enumerate(steps):
            upto = steps[i + 1][0] if i + 1 < len(steps) else end
            lo, hi = max(valid_from, month.start), min(upto, end)
            if hi > lo and count:
                out.append((cluster, model, Fraction(count), lo, hi))
    return {cluster for cluster, _ in by_key}, out


def _inventory_intervals(month: Month, end: datetime, skip: set[str]):
    """GPUs seen by collectors: from the hour of the first sample to the hour after the last one, or to the end of
    the period if the GPU reported within the grace period before it (a GPU between two reports still exists)."""
    grace = timedelta(hours=settings.GOVERNANCE_GPU_GONE_AFTER_HOURS)
    rows = (
        Gpu.objects.filter(first_seen_at__lt=end, last_seen_at__gte=month.start - HOUR)
        .exclude(cluster__name__in=skip)
        .values_list("cluster__name", "model", "mig_profile", "first_seen_at", "last_seen_at")
    )
    for cluster, model, profile, first, last in rows:
        lo = first.replace(minute=0, second=0, microsecond=0)
        hi = last.replace(minute=0, second=0, microsecond=0) + HOUR
        if last >= end - grace:
            hi = max(hi, end)
        lo, hi = max(lo, month.start), min(hi, end)
        if hi > lo:
            yield cluster, model, mig_fraction(model, profile), lo, hi


def month_capacity(*, month: Month, now: datetime, book: RateBook) -> dict[tuple[str, str], Capacity]:
    """Capacity GPU-hours and their cost per (cluster, GPU model): declared where a cluster declares any, else seen."""
    end = _period_end(month, now)
    declared_clusters, intervals = _declared_intervals(month, end)
    capacity: dict[tuple[str, str], Capacity] = defaultdict(Capacity)
    for cluster, model, count, lo, hi in [*intervals, *_inventory_intervals(month, end, declared_clusters)]:
        rates = book.pricing(cluster, model).rates
        cap = capacity[(cluster, model)]
        cap.gpu_hours += scale(gpu_hours(lo, hi, 1), count)
        cap.cost += scale(price_interval(lo, hi, 1, rates).cost, count)
    return dict(capacity)


def _blank(kind: str, month: Month, cluster: str, currency: str, **fields) -> Charge:
    base = {
        "kind": kind, "period_start": month.start, "period_end": month.end, "cluster": cluster, "team_id": None,
        "team": UNALLOCATED, "project": "", "job_ref": "", "user": "", "gpu_model": "", "mig_profile": "",
        "gpu_hours": ZERO, "used_gpu_hours": ZERO, "idle_gpu_hours": ZERO, "cost": ZERO, "idle_cost": ZERO,
        "energy_kwh": ZERO, "energy_cost": ZERO, "currency": currency, "at_default_rate": False,
    }  # fmt: skip
    return Charge(**{**base, **fields})


def month_charges(*, month: Month, now: datetime) -> Iterator[Charge]:
    """Every charge of an open month: job days as they stream, then unallocated capacity per cluster's policy."""
    book = rate_book()
    currency = book_currency(book)
    allocated: dict[tuple[str, str], Capacity] = defaultdict(Capacity)
    by_team: dict[str, dict[tuple[int | None, str], Capacity]] = defaultdict(lambda: defaultdict(Capacity))
    for charge in job_day_charges(month=month, now=now, book=book, currency=currency):
        alloc = allocated[(charge.cluster, charge.gpu_model)]
        alloc.gpu_hours += charge.gpu_hours
        alloc.cost += charge.cost
        team = by_team[charge.cluster][(charge.team_id, charge.team)]
        team.gpu_hours += charge.gpu_hours
        team.cost += charge.cost
        yield charge
    yield from unallocated_charges(
        month=month, capacity=month_capacity(month=month, now=now, book=book), allocated=allocated,
        by_team=by_team, currency=currency,
    )  # fmt: skip


def unallocated_charges(*, month, capacity, allocated, by_team, currency) -> Iterator[Charge]:
    policies = dict(Cluster.objects.values_list("name", "unallocated_policy"))
    free: dict[str, list[Charge]] = defaultdict(list)
    for (cluster, model), cap in sorted(capacity.items()):
        used = allocated.get((cluster, model), Capacity())
        hours, cost = cap.gpu_hours - used.gpu_hours, cap.cost - used.cost
        if hours > 0 or cost > 0:
            free[cluster].append(_blank("unallocated", month, cluster, currency, gpu_model=model,
                                        gpu_hours=max(hours, ZERO), cost=max(cost, ZERO)))  # fmt: skip
    for cluster, lines in free.items():
        teams = by_team.get(cluster, {})
        total = sum((t.cost for t in teams.values()), ZERO)
        if policies.get(cluster) != Cluster.UnallocatedPolicy.SHARE or total <= 0:
            yield from lines
            continue
        yield from _shares(month, cluster, currency, lines, teams, total)


def _shares(month, cluster, currency, lines, teams, total) -> Iterator[Charge]:
    pool_cost = sum((line.cost for line in lines), ZERO)
    pool_hours = sum((line.gpu_hours for line in lines), ZERO)
    ordered = sorted(teams.items(), key=lambda item: item[0][1])
    given_cost, given_hours = ZERO, ZERO
    for i, ((team_id, name), team) in enumerate(ordered):
        if i == len(ordered) - 1:  # the remainder, so the shares add up to the pool exactly
            cost, hours = pool_cost - given_cost, pool_hours - given_hours
        else:
            cost, hours = pool_cost * team.cost / total, pool_hours * team.cost / total
        given_cost += cost
        given_hours += hours
        yield _blank("shared", month, cluster, currency, team_id=team_id, team=name, gpu_hours=hours, cost=cost)


def with_kind(charge: Charge, **fields) -> Charge:
    return replace(charge, **fields)
