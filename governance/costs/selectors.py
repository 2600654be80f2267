"""Reads for chargeback: statements of open months are computed, of closed months read back as frozen."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal

from django.utils import timezone

from governance.costs.ledger import (
    UNALLOCATED,
    UNATTRIBUTED,
    ZERO,
    Charge,
    book_currency,
    month_capacity,
    month_charges,
    rate_book,
)
from governance.costs.models import MonthClose, StatementLine
from governance.lib.money import to_cents
from governance.lib.months import Month

__all__ = ["UNALLOCATED", "UNATTRIBUTED", "Charge", "TeamCharge", "chargeback_by_team", "chargeback_months"]

AMOUNTS = ("gpu_hours", "used_gpu_hours", "idle_gpu_hours", "cost", "idle_cost", "energy_kwh", "energy_cost")
# The precision a frozen line keeps (StatementLine): live lines are compared with frozen ones at this precision.
PLACES = {"gpu_hours": 6, "used_gpu_hours": 6, "idle_gpu_hours": 6, "energy_kwh": 6,
          "cost": 10, "idle_cost": 10, "energy_cost": 10}  # fmt: skip


@dataclass(frozen=True)
class TeamCharge:
    month: Month
    team: str
    gpu_hours: Decimal
    cost: Decimal
    currency: str


def month_closed(month: Month) -> MonthClose | None:
    return MonthClose.objects.filter(month=month.start.date()).first()


def closed_months() -> set[Month]:
    return {Month(d.year, d.month) for d in MonthClose.objects.values_list("month", flat=True)}


def frozen(charge: Charge) -> Charge:
    """The charge at the precision a frozen statement line keeps."""
    return replace(
        charge, **{name: getattr(charge, name).quantize(Decimal(1).scaleb(-p)) for name, p in PLACES.items()}
    )


def line_charge(line: StatementLine) -> Charge:
    corrects = Month(line.corrects.year, line.corrects.month) if line.corrects else None
    return Charge(
        kind=line.kind, period_start=line.period_start, period_end=line.period_end, cluster=line.cluster_name,
        team_id=line.team_id, team=line.team_name, project=line.project_name, job_ref=line.job_ref,
        user=line.user_name, gpu_model=line.gpu_model, mig_profile=line.mig_profile, gpu_hours=line.gpu_hours,
        used_gpu_hours=line.used_gpu_hours, idle_gpu_hours=line.idle_gpu_hours, cost=line.cost,
        idle_cost=line.idle_cost, energy_kwh=line.energy_kwh, energy_cost=line.energy_cost, currency=line.currency,
        at_default_rate=line.at_default_rate, corrects=corrects,
    )  # fmt: skip


def frozen_charges(close: MonthClose, team_ids: Iterable[int] | None = None) -> Iterator[Charge]:
    lines = StatementLine.objects.filter(close=close).order_by("id")
    if team_ids is not None:
        lines = lines.filter(team_id__in=list(team_ids))
    for line in lines.iterator(chunk_size=5000):
        yield line_charge(line)


def _key(c: Charge) -> tuple:
    return (c.cluster, c.team_id, c.team, c.project, c.job_ref, c.user, c.gpu_model, c.mig_profile)


def _totals(charges: Iterable[Charge]) -> dict[tuple, tuple[list[Decimal], Charge]]:
    totals: dict[tuple, tuple[list[Decimal], Charge]] = {}
    for c in charges:
        entry = totals.setdefault(_key(c), ([ZERO] * len(AMOUNTS), c))
        for i, name in enumerate(AMOUNTS):
            entry[0][i] += getattr(c, name)
    return totals


def adjustments_for(*, corrected: Month, landing: Month, now: datetime) -> list[Charge]:
    """What a closed month would cost now, less what was frozen and already corrected: the late usage."""
    close = month_closed(corrected)
    if close is None:
        return []
    live = _totals(frozen(c) for c in month_charges(month=corrected, now=now))
    billed_lines = StatementLine.objects.filter(
        close=close, kind__in=[StatementLine.Kind.USAGE, StatementLine.Kind.UNALLOCATED, StatementLine.Kind.SHARED]
    ) | StatementLine.objects.filter(corrects=corrected.start.date())
    billed = _totals(line_charge(line) for line in billed_lines.iterator(chunk_size=5000))
    out = []
    for key in sorted(set(live) | set(billed), key=str):
        now_amounts, sample = live.get(key) or ([ZERO] * len(AMOUNTS), billed[key][1])
        was = billed[key][0] if key in billed else [ZERO] * len(AMOUNTS)
        diff = {name: now_amounts[i] - was[i] for i, name in enumerate(AMOUNTS)}
        if any(diff.values()):
            out.append(replace(sample, kind="adjustment", period_start=landing.start, period_end=landing.end,
                               corrects=corrected, **diff))  # fmt: skip
    return out


def months_corrected_in(month: Month) -> list[Month]:
    """The closed months whose late usage lands in `month`: the run of closed months just before it."""
    closed = closed_months()
    out, previous = [], month.previous()
    while previous in closed:
        out.append(previous)
        previous = previous.previous()
    return sorted(out)


def statement_charges(*, month: Month, now: datetime | None = None, team_ids: Iterable[int] | None = None,
                      adjustments: bool = True) -> Iterator[Charge]:  # fmt: skip
    """Every line of a month's statement, streamed: frozen if the month is closed, else computed now."""
    now = now or timezone.now()
    close = month_closed(month)
    allowed = None if team_ids is None else set(team_ids)
    if close is not None:
        for charge in frozen_charges(close, allowed):
            if adjustments or charge.kind != "adjustment":
                yield charge
        return
    for charge in open_month_charges(month=month, now=now, adjustments=adjustments):
        if allowed is None or charge.team_id in allowed:
            yield charge


def open_month_charges(*, month: Month, now: datetime, adjustments: bool = True) -> Iterator[Charge]:
    """The month as computed now, with the corrections of the closed months just before it."""
    yield from month_charges(month=month, now=now)
    if adjustments:
        for corrected in months_corrected_in(month):
            yield from adjustments_for(corrected=corrected, landing=month, now=now)


def chargeback_by_team(*, month: Month, now: datetime | None = None) -> list[TeamCharge]:
    """Per team (and the unallocated line), the month's GPU-hours and cost, adjustments included."""
    totals: dict[str, list[Decimal]] = defaultdict(lambda: [ZERO, ZERO])
    currency = None
    for c in statement_charges(month=month, now=now):
        totals[c.team][0] += c.gpu_hours
        totals[c.team][1] += c.cost
        currency = c.currency
    currency = currency or book_currency(rate_book())
    return [
        TeamCharge(month=month, team=team, gpu_hours=hours, cost=cost, currency=currency)
        for team, (hours, cost) in sorted(totals.items())
    ]


def chargeback_months(*, months: list[Month], now: datetime | None = None) -> list[TeamCharge]:
    return [charge for month in months for charge in chargeback_by_team(month=month, now=now)]


@dataclass
class Breakdown:
    """A team's month: totals, lines per project and GPU model, and what the lines were priced at."""

    month: Month
    currency: str
    cost: Decimal = ZERO
    gpu_hours: Decimal = ZERO
    idle_cost: Decimal = ZERO
    used_gpu_hours: Decimal = ZERO
    adjustments: Decimal = ZERO
    unallocated_share: Decimal = ZERO
    by_project: dict[str, Decimal] = field(default_factory=lambda: defaultdict(Decimal))
    by_model: dict[str, Decimal] = field(default_factory=lambda: defaultdict(Decimal))
    lines: dict[tuple[str, str], list[Decimal]] = field(default_factory=dict)
    at_default_rate: set[str] = field(default_factory=set)

    @property
    def idle_share(self) -> Decimal:
        return self.idle_cost / self.cost if self.cost else ZERO


def sku(c: Charge) -> str:
    return f"{c.gpu_model} MIG {c.mig_profile}" if c.mig_profile else c.gpu_model


def team_breakdown(*, month: Month, team_id: int, now: datetime | None = None) -> Breakdown:
    out = Breakdown(month=month, currency=book_currency(rate_book()))
    for c in statement_charges(month=month, now=now, team_ids=[team_id]):
        project = c.project or ("(share of unallocated)" if c.kind == "shared" else "(none)")
        model = sku(c) or "-"
        out.cost += c.cost
        out.gpu_hours += c.gpu_hours
        out.idle_cost += c.idle_cost
        out.used_gpu_hours += c.used_gpu_hours
        out.currency = c.currency
        if c.kind == "adjustment":
            out.adjustments += c.cost
        if c.kind == "shared":
            out.unallocated_share += c.cost
        if c.at_default_rate and c.kind == "usage":
            out.at_default_rate.add(c.job_ref)
        out.by_project[project] += c.cost
        out.by_model[model] += c.cost
        line = out.lines.setdefault((project, model), [ZERO, ZERO, ZERO])
        line[0] += c.gpu_hours
        line[1] += c.cost
        line[2] += c.idle_cost
    return out


def team_trend(
    *, month: Month, team_id: int, months: int = 12, now: datetime | None = None
) -> list[tuple[Month, Decimal, Decimal]]:
    """A team's cost and idle cost for the `months` months up to `month`, oldest first."""
    series = []
    current = month
    for _ in range(months):
        cost = idle = ZERO
        for c in statement_charges(month=current, now=now, team_ids=[team_id]):
            cost += c.cost
            idle += c.idle_cost
        series.append((current, cost, idle))
        current = current.previous()
    return list(reversed(series))


@dataclass(frozen=True)
class ClusterCheck:
    cluster: str
    charged: Decimal
    capacity_cost: Decimal

    @property
    def off_by(self) -> Decimal:
        return to_cents(self.charged) - to_cents(self.capacity_cost)


@dataclass(frozen=True)
class Reconciliation:
    month: Month
    currency: str
    clusters: list[ClusterCheck]
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


GAP = "{cluster}: {model} allocated {allocated} GPU-hours but capacity is {capacity} (gap {gap} GPU-hours)"
OFF = (
    "{cluster}: team charges + unallocated = {charged} {currency} but capacity x rate = {capacity} {currency}"
    " (off by {off})"
)


def reconcile(*, month: Month, now: datetime | None = None) -> Reconciliation:
    """Check that, per cluster, the statement (without adjustments) adds up to capacity x rate, to the cent."""
    now = now or timezone.now()
    book = rate_book()
    currency = book_currency(book)
    capacity = month_capacity(month=month, now=now, book=book)
    charged: dict[str, Decimal] = defaultdict(Decimal)
    allocated: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for c in statement_charges(month=month, now=now, adjustments=False):
        charged[c.cluster] += c.cost
        if c.kind == "usage":
            allocated[(c.cluster, c.gpu_model)] += c.gpu_hours
    capacity_cost: dict[str, Decimal] = defaultdict(Decimal)
    for (cluster, _), cap in capacity.items():
        capacity_cost[cluster] += cap.cost
    problems = []
    for (cluster, model), hours in sorted(allocated.items()):
        cap = capacity.get((cluster, model))
        cap_hours = cap.gpu_hours if cap else ZERO
        if to_cents(hours - cap_hours) > 0:
            problems.append(GAP.format(cluster=cluster, model=model or "(unknown model)", allocated=to_cents(hours),
                                       capacity=to_cents(cap_hours), gap=to_cents(hours - cap_hours)))  # fmt: skip
    names = sorted(set(charged) | set(capacity_cost))
    checks = [ClusterCheck(name, charged[name], capacity_cost[name]) for name in names]
    for check in checks:
        if check.off_by:
            problems.append(OFF.format(cluster=check.cluster, charged=to_cents(check.charged), currency=currency,
                                       capacity=to_cents(check.capacity_cost), off=check.off_by))  # fmt: skip
    return Reconciliation(month=month, currency=currency, clusters=checks, problems=problems)
