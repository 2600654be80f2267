"""The invariants finance relies on, checked over whole months; every case that changes billing calls them.

- Every month reconciles: per cluster, team charges + shares + unallocated = capacity x rate, to the cent; for a
  closed month also frozen lines + the corrections that landed for it = the month re-priced under its terms.
- A closed month never moves: its frozen totals per team are the same before and after any change.
- Corrections carry a month and a reason, and no correction row is zero.
- Waste is a partition of the bill: the findings' waste of a job is at most the job's usage charges, and of a
  team at most the team's.
- Savings are measured, not extrapolated: a finding's savings are at most what its job cost since the window the
  savings were measured over began, a job's findings' at most the job's bill in that window, and a team's open
  findings' at most what the team spent in the same window.
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
        zero = adjustments.filter(
            gpu_hours=0, cost=0, list_cost=0, contracted_cost=0, billed_cost=0, commitment_gpu_hours=0, idle_cost=0,
            energy_kwh=0, used_gpu_hours=0, idle_gpu_hours=0,
        )  # fmt: skip
        assert not zero.exists(), "a zero correction row was written"


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


def assert_savings_within_spend() -> dict[str, dict]:
    """Per finding, per job and per team (open findings), the savings against the ledger's usage charges over the
    savings window (from the earliest `savings_from` of the findings checked on); returns the teams' for reports."""
    from governance.efficiency.models import Finding

    findings = list(
        Finding.objects.filter(savings_from__isnull=False).values("pk", "job_id", "state", "savings", "savings_from")
    )
    if not findings:
        return {"teams": {}}
    usage = Charge.objects.filter(kind=Charge.Kind.USAGE)
    since = min(f["savings_from"] for f in findings)
    job_team = dict(usage.filter(job_id__in={f["job_id"] for f in findings}).values_list("job_id", "team_id"))
    job_days: dict[int, list[tuple]] = defaultdict(list)
    for job_id, day, cost in usage.filter(day__gte=since, job_id__in=job_team).values_list("job_id", "day", "cost"):
        job_days[job_id].append((day, cost))

    def job_spend(job_id: int, start: object) -> Decimal:
        return to_cents(sum((c for d, c in job_days.get(job_id, []) if d >= start), Decimal(0)))

    over = {f["pk"]: (f["savings"], job_spend(f["job_id"], f["savings_from"])) for f in findings}
    over = {pk: v for pk, v in over.items() if v[0] > v[1]}
    assert not over, f"findings that save more than their job cost in their window (savings, cost): {over}"
    job_savings: dict[int, Decimal] = defaultdict(Decimal)
    team_savings: dict[int | None, Decimal] = defaultdict(Decimal)
    for f in findings:
        job_savings[f["job_id"]] += f["savings"]
        if f["state"] == "open":
            team_savings[job_team.get(f["job_id"])] += f["savings"]
    over = {j: (s, job_spend(j, since)) for j, s in job_savings.items() if s > job_spend(j, since)}
    assert not over, f"jobs whose findings save more than their bill in the window (savings, bill): {over}"
    team_spend = {
        r["team_id"]: to_cents(r["cost"])
        for r in usage.filter(day__gte=since).values("team_id").annotate(cost=Sum("cost"))
    }
    teams = {t: (s, team_spend.get(t, Decimal(0))) for t, s in team_savings.items()}
    over = {t: v for t, v in teams.items() if v[0] > v[1]}
    assert not over, f"teams whose open findings save more than they spent in the window (savings, spend): {over}"
    return {"teams": teams}


def assert_billing_invariants(before: ClosedTotals | None = None) -> None:
    assert_every_month_reconciles()
    assert_corrections_well_formed()
    assert_savings_within_spend()
    if before is not None:
        assert_closed_unchanged(before)
