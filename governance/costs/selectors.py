"""Reads for chargeback: SQL aggregates over the ledger (open months) or the frozen lines (closed months).

Nothing here prices anything: the worker keeps the rows current (governance/costs/reprice.py), so a read costs
what the rows it aggregates cost, whatever the number of jobs or samples behind them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, Max, Q, QuerySet, Sum

from governance.costs.commitment_checks import commitments_check
from governance.costs.corrections import closed_months
from governance.costs.ledger import AMOUNTS, UNALLOCATED, UNATTRIBUTED, ZERO
from governance.costs.models import CapacityDay, Charge, LedgerDay, MonthClose, StatementLine
from governance.costs.unpriced import unpriced_problems
from governance.lib.memo import memoised
from governance.lib.money import printed, to_cents
from governance.lib.months import Month

__all__ = [
    "UNALLOCATED", "UNATTRIBUTED", "Line", "TeamCharge", "chargeback_by_team", "chargeback_months", "month_rows",
    "reconcile", "statement_charges", "team_trend",
]  # fmt: skip

LINE_FIELDS = (
    "kind", "period_start", "period_end", "cluster_name", "team_id", "team_name", "project_name", "job_ref",
    "user_name", "gpu_model", "mig_profile", *AMOUNTS, "currency", "at_default_rate", "corrects", "reason", "billed",
    "commitment_id", "gpu_share",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a statement as read back: a job's day, a cluster's unallocated capacity, a share, a correction."""

    kind: str
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
    carbon_kg: Decimal
    list_cost: Decimal
    contracted_cost: Decimal
    billed_cost: Decimal
    commitment_gpu_hours: Decimal
    currency: str
    at_default_rate: bool
    corrects: Month | None
    reason: str
    billed: bool = True
    commitment_id: int | None = None
    gpu_share: Decimal | None = None  # the share of one GPU a job's usage line declared (0.47); None: whole GPUs


def month_closed(month: Month) -> MonthClose | None:
    """The month's close, None while it is open (asked once per page: see governance/lib/memo.py)."""
    return memoised(
        ("month_closed", month.start),
        lambda: MonthClose.objects.filter(month=month.start.date()).select_related("closed_by").first(),
    )


def month_rows(month: Month, team_ids: Iterable[int | None] | None = None, close: MonthClose | None = None) -> QuerySet:
    """A month's statement rows: the frozen lines once it is closed, else the ledger's rows (corrections included).

    `team_ids` keeps the rows of those teams (None in it: the unattributed and unallocated rows).
    """
    close = close if close is not None else month_closed(month)
    rows = StatementLine.objects.filter(close=close) if close else Charge.objects.filter(month=month.start.date())
    if team_ids is not None:
        ids = list(team_ids)
        known = [i for i in ids if i is not None]
        wanted = Q(team_id__in=known) | Q(team_id__isnull=True) if None in ids else Q(team_id__in=known)
        rows = rows.filter(wanted)
    return rows


def _corrects(value: date | None) -> Month | None:
    return Month(value.year, value.month) if value else None


def statement_charges(
    *, month: Month, team_ids: Iterable[int | None] | None = None, adjustments: bool = True
) -> Iterator[Line]:
    """Every line of a month's statement, streamed in statement order."""
    rows = month_rows(month, team_ids)
    if not adjustments:
        rows = rows.exclude(kind="adjustment")
    # usage, unallocated, shared, adjustment: the kinds in reverse alphabetical order, as the CSV lists them.
    ordered = rows.order_by("-kind", "period_start", "id")
    for r in ordered.values_list(*LINE_FIELDS).iterator(chunk_size=5000):
        values = dict(zip(LINE_FIELDS, r, strict=True))
        yield Line(
            kind=values["kind"], period_start=values["period_start"], period_end=values["period_end"],
            cluster=values["cluster_name"], team_id=values["team_id"], team=values["team_name"],
            project=values["project_name"], job_ref=values["job_ref"], user=values["user_name"],
            gpu_model=values["gpu_model"], mig_profile=values["mig_profile"],
            **{a: values[a] for a in AMOUNTS}, currency=values["currency"],
            at_default_rate=values["at_default_rate"], corrects=_corrects(values["corrects"]),
            reason=values["reason"], billed=values["billed"], commitment_id=values["commitment_id"],
            gpu_share=values["gpu_share"],
        )  # fmt: skip


@dataclass(frozen=True)
class TeamCharge:
    """A team's month (or the unattributed jobs', or the unallocated line's): exact sums, and the cents printed."""

    month: Month
    team_id: int | None
    team: str
    gpu_hours: Decimal
    cost: Decimal
    idle_cost: Decimal
    currency: str
    printed_cost: Decimal = ZERO
    printed_idle_cost: Decimal = ZERO
    shared_gpu_cost: Decimal = ZERO  # of `cost`: usage on shares of one GPU (time-slicing, MPS, fractional requests)

    @property
    def unallocated(self) -> bool:
        return self.team_id is None and self.team == UNALLOCATED


def month_sums(month: Month, team_ids: Iterable[int | None] | None = None, close: MonthClose | None = None) -> QuerySet:
    """What a month's totals are summed from: the frozen lines once it is closed, else the ledger's per-day summary
    (a row per cluster, team, project, GPU model and kind a day, not one per job-day). Both have the ledger's key
    columns and amounts; a share of one GPU is `gpu_share` on a line, `shared_cost`/`shared_gpu_hours` on a summary."""
    close = close if close is not None else month_closed(month)
    if close is not None:
        return month_rows(month, team_ids, close)
    rows = LedgerDay.objects.filter(month=month.start.date())
    if team_ids is not None:
        ids = list(team_ids)
        known = [i for i in ids if i is not None]
        rows = rows.filter(Q(team_id__in=known) | Q(team_id__isnull=True) if None in ids else Q(team_id__in=known))
    return rows


def _currency(rows: QuerySet) -> str:
    return rows.aggregate(c=Max("currency"))["c"] or settings.GOVERNANCE_DEFAULT_CURRENCY


def chargeback_by_team(
    *, month: Month, team_ids: Iterable[int | None] | None = None, cluster_name: str | None = None
) -> list[TeamCharge]:
    """Per team (by id; the unattributed jobs and the unallocated line under None, by name), the month's GPU-hours,
    cost and idle cost, corrections included: the statement's lines. The printed cents are placed over every line
    of the month (or of the cluster), whatever `team_ids` keeps, so a team's figure is the same on every page."""
    close = month_closed(month)
    # An open month's figures come from the ledger's per-day summary: a row per team and day, not per job-day.
    rows = month_rows(month, close=close) if close else LedgerDay.objects.filter(month=month.start.date())
    if cluster_name:
        rows = rows.filter(cluster_name=cluster_name)
    currency = _currency(rows)
    shared = Sum("cost", filter=Q(gpu_share__isnull=False)) if close else Sum("shared_cost")
    totals = (
        rows.values("team_id", "team_name")
        .annotate(shared=shared)  # first: from then on "cost" names the sum
        .annotate(hours=Sum("gpu_hours"), cost=Sum("cost"), idle=Sum("idle_cost"))
        .order_by()
    )
    merged: dict[tuple[int | None, str], list[Decimal]] = defaultdict(lambda: [ZERO, ZERO, ZERO, ZERO])
    names: dict[int | None, str] = {}
    for r in totals:
        key = (r["team_id"], r["team_name"] if r["team_id"] is None else "")
        names.setdefault(r["team_id"], r["team_name"])
        entry = merged[key]
        entry[0] += r["hours"] or ZERO
        entry[1] += r["cost"] or ZERO
        entry[2] += r["idle"] or ZERO
        entry[3] += r["shared"] or ZERO
    lines = sorted(((name or names.get(team_id, ""), team_id or 0, team_id, amounts)
                    for (team_id, name), amounts in merged.items()), key=lambda line: line[:2])  # fmt: skip
    costs = printed([a[1] for *_, a in lines])
    idle = printed([a[2] for *_, a in lines])
    wanted = None if team_ids is None else set(team_ids)
    return [
        TeamCharge(month=month, team_id=team_id, team=name, gpu_hours=h, cost=c, idle_cost=i, currency=currency,
                   printed_cost=costs[n], printed_idle_cost=idle[n], shared_gpu_cost=shared_cost)
        for n, (name, _, team_id, (h, c, i, shared_cost)) in enumerate(lines)
        if wanted is None or team_id in wanted
    ]  # fmt: skip


def chargeback_months(*, months: list[Month], team_ids: Iterable[int | None] | None = None) -> list[TeamCharge]:
    ids = None if team_ids is None else list(team_ids)
    return [charge for month in months for charge in chargeback_by_team(month=month, team_ids=ids)]


def sku(gpu_model: str, mig_profile: str) -> str:
    return f"{gpu_model} MIG {mig_profile}" if mig_profile else gpu_model


def team_trend(*, month: Month, team_id: int, months: int = 12) -> list[tuple[Month, Decimal, Decimal]]:
    """A team's cost and idle cost for the `months` months up to `month`, oldest first (two queries)."""
    wanted = [month]
    while len(wanted) < months:
        wanted.append(wanted[-1].previous())
    closed = closed_months()
    firsts = [m.start.date() for m in wanted]
    totals: dict[date, tuple[Decimal, Decimal]] = {}
    frozen = (
        StatementLine.objects.filter(close__month__in=[m.start.date() for m in wanted if m in closed], team_id=team_id)
        .values("close__month")
        .annotate(cost=Sum("cost"), idle=Sum("idle_cost"))
        .values_list("close__month", "cost", "idle")
    )
    live = (
        LedgerDay.objects.filter(month__in=[m.start.date() for m in wanted if m not in closed], team_id=team_id)
        .values("month")
        .annotate(cost=Sum("cost"), idle=Sum("idle_cost"))
        .values_list("month", "cost", "idle")
    )
    for first, cost, idle in [*frozen, *live]:
        totals[first] = (cost or ZERO, idle or ZERO)
    return [(m, *totals.get(first, (ZERO, ZERO))) for m, first in reversed(list(zip(wanted, firsts, strict=True)))]


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


GAP = "{cluster}: {model} on {day} allocated {allocated} GPU-hours but capacity is {capacity} (gap {gap} GPU-hours)"
OFF = (
    "{cluster}: team charges + unallocated = {charged} {currency} but capacity x rate = {capacity} {currency}"
    " (off by {off})"
)
DRIFT = (
    "{cluster}: the closed month's frozen lines + corrections = {billed} {currency} but the month re-priced under"
    " its own terms = {repriced} {currency} (off by {off})"
)


def reconcile(*, month: Month) -> Reconciliation:
    """Per cluster, the month's charges (corrections aside) add up to capacity x rate, to the cent; for a closed
    month also: its frozen lines + the corrections that landed for it = the month re-priced under its own terms.
    Usage no rate card prices is a problem too, unless finance accepted it when the month closed."""
    close = month_closed(month)
    # The ledger's per-day summary: the same sums by cluster and day as the ledger's rows.
    ledger = LedgerDay.objects.filter(month=month.start.date()).exclude(kind="adjustment")
    currency = _currency(ledger)
    # Capacity is priced at list, and so is what jobs took of it; commitments are checked on their own.
    at_list = ledger.exclude(kind__in=["unused", "purchase"]).values("cluster_name").annotate(c=Sum("list_cost"))
    charged = dict(at_list.values_list("cluster_name", "c"))
    effective = dict(ledger.values("cluster_name").annotate(c=Sum("cost")).values_list("cluster_name", "c"))
    capacity = CapacityDay.objects.filter(day__gte=month.start.date(), day__lt=month.end.date())
    capacity_cost = dict(capacity.values("cluster__name").annotate(c=Sum("cost")).values_list("cluster__name", "c"))
    problems = []
    # Per day: GPU-hours held on a day cannot come from another day's idle capacity.
    allocated = ledger.filter(kind="usage").values("cluster_name", "day", "gpu_model").annotate(h=Sum("gpu_hours"))
    cap_hours = {
        (r["cluster__name"], r["day"], r["gpu_model"]): r["h"]
        for r in capacity.values("cluster__name", "day", "gpu_model").annotate(h=Sum("gpu_hours"))
    }
    for r in sorted(allocated, key=lambda r: (r["cluster_name"], r["day"], r["gpu_model"])):
        cap = cap_hours.get((r["cluster_name"], r["day"], r["gpu_model"]), ZERO)
        if to_cents(r["h"] - cap) > 0:
            gap = to_cents(r["h"] - cap)
            model = r["gpu_model"] or "(unknown model)"
            problems.append(GAP.format(cluster=r["cluster_name"], model=model, day=r["day"], allocated=to_cents(r["h"]),
                                       capacity=to_cents(cap), gap=gap))  # fmt: skip
    names = sorted(set(charged) | set(capacity_cost))
    checks = [ClusterCheck(n, charged.get(n) or ZERO, capacity_cost.get(n) or ZERO) for n in names]
    for check in checks:
        if check.off_by:
            problems.append(OFF.format(cluster=check.cluster, charged=to_cents(check.charged), currency=currency,
                                       capacity=to_cents(check.capacity_cost), off=check.off_by))  # fmt: skip
    problems.extend(commitments_check(month=month, currency=currency))
    if close is not None:
        problems.extend(_closed_month_drift(month, close, effective, currency))
    problems.extend(unpriced_problems(month=month, close=close))
    return Reconciliation(month=month, currency=currency, clusters=checks, problems=problems)


def _closed_month_drift(month: Month, close: MonthClose, repriced: dict[str, Decimal], currency: str) -> list[str]:
    billed: dict[str, Decimal] = defaultdict(Decimal)
    frozen = StatementLine.objects.filter(close=close).exclude(kind="adjustment")
    for name, cost in frozen.values("cluster_name").annotate(c=Sum("cost")).values_list("cluster_name", "c"):
        billed[name] += cost
    landed: list[QuerySet[StatementLine] | QuerySet[Charge]] = [
        StatementLine.objects.filter(kind="adjustment", corrects=month.start.date()),
        Charge.objects.filter(kind="adjustment", corrects=month.start.date()).exclude(
            month__in=[m.start.date() for m in closed_months()]
        ),
    ]
    for rows in landed:
        for name, cost in rows.values("cluster_name").annotate(c=Sum("cost")).values_list("cluster_name", "c"):
            billed[name] += cost
    problems = []
    for name in sorted(set(billed) | set(repriced)):
        off = to_cents(billed.get(name, ZERO)) - to_cents(repriced.get(name) or ZERO)
        if off:
            problems.append(DRIFT.format(cluster=name, billed=to_cents(billed.get(name, ZERO)), currency=currency,
                                         repriced=to_cents(repriced.get(name) or ZERO), off=off))  # fmt: skip
    return problems


@dataclass(frozen=True)
class Unattributed:
    """GPU-hours billed to no team: jobs whose account (Slurm) or namespace (Kubernetes) no mapping names."""

    cluster: str
    account: str
    mapping_kind: str
    jobs: int
    gpu_hours: Decimal
    cost: Decimal
    currency: str


def unattributed(*, month: Month) -> list[Unattributed]:
    """What a month billed to no team, per cluster and account, largest first (the worklist of mappings)."""
    rows = month_rows(month, [None]).filter(kind="usage", team_id__isnull=True)
    currency = _currency(rows)
    groups = (
        rows.values("cluster_name", "job__account")
        .annotate(jobs=Count("job_id", distinct=True), hours=Sum("gpu_hours"), cost=Sum("cost"), pods=Max("job_ref"))
        .order_by("-cost", "cluster_name", "job__account")
    )
    return [
        Unattributed(
            cluster=g["cluster_name"], account=g["job__account"] or "", jobs=g["jobs"], gpu_hours=g["hours"] or ZERO,
            cost=g["cost"] or ZERO, currency=currency,
            # A pod's job id is `namespace/pod`: its account is a namespace.
            mapping_kind="k8s_namespace" if "/" in (g["pods"] or "") else "slurm_account",
        )
        for g in groups
    ]  # fmt: skip
