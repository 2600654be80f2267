"""The invariants finance relies on, checked over whole months; every case that changes billing calls them.

- Every month reconciles: per cluster, team charges + shares + unallocated = capacity x rate, to the cent; for a
  closed month also frozen lines + the corrections that landed for it = the month re-priced under its terms.
- A closed month never moves: its frozen totals per team are the same before and after any change.
- Corrections carry a month and a reason, and no correction row is zero.
- Money adds up as printed: per billed month the statement's printed lines sum to its printed total, which is the
  exact total rounded, and each team's printed breakdowns sum to the team's printed line (the pages' own builders).
- Waste is a partition of the bill: the findings' waste of a job is at most the job's usage charges, and of a
  team at most the team's.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from django.db.models import Sum

from governance.costs.models import Charge, MonthClose, StatementLine
from governance.costs.selectors import reconcile
from governance.lib.money import to_cents
from governance.lib.months import Month

TWO_CENTS = Decimal("0.02")
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
        zero = adjustments.filter(
            gpu_hours=0, cost=0, list_cost=0, contracted_cost=0, billed_cost=0, commitment_gpu_hours=0, idle_cost=0,
            energy_kwh=0, used_gpu_hours=0, idle_gpu_hours=0,
        )  # fmt: skip
        assert not zero.exists(), "a zero correction row was written"


def assert_printed_totals_add_up() -> None:
    """Through the builders the pages use: the finance month's table, and each team's lines and project table."""
    from governance.costs.breakdowns import cost_by
    from governance.costs.selectors import team_breakdown
    from governance.dashboard.tables import groups_table
    from governance.dashboard.views.costs import _finance_context, printed_lines

    for month in months_billed():
        page = _finance_context(month)
        lines = [c for c, *_ in page["rows"]]
        exact = sum((c.cost for c in lines), Decimal(0))
        assert page["total"] == sum(c.printed_cost for c in lines) == to_cents(exact), f"{month}: total {page['total']}"
        corrections = page["corrections"]
        assert page["corrections_total"] == to_cents(sum((c.cost for c in corrections), Decimal(0))), f"{month}"
        for line in lines:
            if line.team_id is None:
                continue
            breakdown = team_breakdown(month=month, team_id=line.team_id)
            groups = cost_by(month=month, team_ids=[line.team_id], by="project")
            # The breakdowns cover the team's line (a missing row would hide in the placed cents otherwise) ...
            for name, exact_parts in [
                ("lines", [a[1] for a in breakdown.lines.values()]),
                ("projects", [g.cost for g in groups]),
            ]:
                assert to_cents(sum(exact_parts, Decimal(0))) == to_cents(line.cost), f"{month} {line.team}: {name}"
            # ... and, printed, add up to it, each within a cent or two of its exact amount.
            team_lines = printed_lines(breakdown, line)
            table = groups_table("projects", "", "", groups, printed_as=(line.printed_cost, line.printed_idle_cost))
            assert sum(amounts[1] for _, amounts in team_lines) == line.printed_cost, f"{month} {line.team}: lines"
            assert sum(row[2].data or 0 for row in table.rows) == line.printed_cost, f"{month} {line.team}: projects"
            assert sum(row[3].data or 0 for row in table.rows) == line.printed_idle_cost, f"{month} {line.team}: idle"
            off = [
                g.key
                for g, row in zip(groups, table.rows, strict=True)
                if abs((row[2].data or 0) - g.cost) >= TWO_CENTS
            ]
            assert not off, f"{month} {line.team}: printed more than two cents from exact: {off}"


def assert_waste_within_bill() -> dict[str, dict]:
    """Per job and per team, the findings' waste against the ledger's usage charges; returns both for reports."""
    from governance.efficiency.models import Finding

    usage = Charge.objects.filter(kind=Charge.Kind.USAGE)
    job_bill = {r["job_id"]: r["cost"] for r in usage.values("job_id").annotate(cost=Sum("cost"))}
    team_bill = {r["team_id"]: r["cost"] for r in usage.values("team_id").annotate(cost=Sum("cost"))}
    job_team = dict(usage.values_list("job_id", "team_id").distinct())
    job_waste = {r["job_id"]: r["waste"] for r in Finding.objects.values("job_id").annotate(waste=Sum("waste"))}
    team_waste: dict[int | None, Decimal] = defaultdict(Decimal)
    for job_id, waste in job_waste.items():
        team_waste[job_team.get(job_id)] += waste
    over = {j: (w, job_bill.get(j)) for j, w in job_waste.items() if w > to_cents(job_bill.get(j) or 0)}
    assert not over, f"jobs whose findings waste more than their bill (waste, bill): {over}"
    over = {t: (w, team_bill.get(t)) for t, w in team_waste.items() if w > to_cents(team_bill.get(t) or 0)}
    assert not over, f"teams whose findings waste more than their bill (waste, bill): {over}"
    return {"jobs": {j: (w, job_bill.get(j)) for j, w in job_waste.items()}, "teams": dict(team_waste)}


def assert_billing_invariants(before: ClosedTotals | None = None) -> None:
    assert_every_month_reconciles()
    assert_corrections_well_formed()
    assert_printed_totals_add_up()
    if before is not None:
        assert_closed_unchanged(before)
