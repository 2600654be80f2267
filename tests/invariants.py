"""The invariants finance relies on, checked over whole months; every case that changes billing calls them.

- Every month reconciles: per cluster, team charges + shares + unallocated = capacity x rate, to the cent; for a
  closed month also frozen lines + the corrections that landed for it = the month re-priced under its terms.
- A closed month never moves: its frozen totals per team are the same before and after any change.
- Corrections carry a month and a reason, and no correction row is zero.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from django.db.models import Sum

from governance.costs.models import Charge, MonthClose, StatementLine
from governance.costs.selectors import reconcile
from governance.lib.money import to_cents
from governance.lib.months import Month

ClosedTotals = dict[tuple[str, int | None, str], Decimal]


def months_billed() -> list[Month]:
    days = set(Charge.objects.values_list("month", flat=True).distinct())
    days |= set(MonthClose.objects.values_list("month", flat=True))
    return sorted(Month(d.year, d.month) for d in days)


def assert_every_month_reconciles() -> list[Month]:
    months = months_billed()
    problems = {str(m): r.problems for m in months if not (r := reconcile(month=m)).ok}
    assert not problems, f"months that do not reconcile: {problems}"
    return months


def closed_totals() -> ClosedTotals:
    """What every closed month billed each team (frozen lines), to the cent."""
    out: ClosedTotals = defaultdict(Decimal)
    rows = StatementLine.objects.values("close__month", "team_id", "team_name").annotate(cost=Sum("cost"))
    for r in rows:
        out[(f"{r['close__month']:%Y-%m}", r["team_id"], r["team_name"])] += to_cents(r["cost"])
    return dict(out)


def assert_closed_unchanged(before: ClosedTotals) -> None:
    after = closed_totals()
    moved = {k: (before.get(k), after.get(k)) for k in set(before) | set(after) if before.get(k) != after.get(k)}
    # A month closed since `before` adds lines; a month closed before must not move by a cent.
    moved = {k: v for k, v in moved.items() if v[0] is not None}
    assert not moved, f"closed months moved: {moved}"


def assert_corrections_well_formed() -> None:
    for table in (Charge.objects, StatementLine.objects):
        adjustments = table.filter(kind="adjustment")
        assert not adjustments.filter(corrects__isnull=True).exists(), "a correction names no month"
        assert not adjustments.filter(reason="").exists(), "a correction gives no reason"
        zero = adjustments.filter(gpu_hours=0, cost=0, idle_cost=0, energy_kwh=0, used_gpu_hours=0, idle_gpu_hours=0)
        assert not zero.exists(), "a zero correction row was written"


def assert_billing_invariants(before: ClosedTotals | None = None) -> None:
    assert_every_month_reconciles()
    assert_corrections_well_formed()
    if before is not None:
        assert_closed_unchanged(before)
