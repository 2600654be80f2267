"""The invariants finance relies on, checked over whole months; every case that changes billing calls them.

- Every month reconciles: per cluster, team charges + shares + unallocated = capacity x rate, to the cent; for a
  closed month also frozen lines + the corrections that landed for it = the month re-priced under its terms.
- A closed month never moves: its frozen totals per team are the same before and after any change.
- Corrections carry a month and a reason, and no correction row is zero.
- Money adds up as printed: per billed month the statement's printed lines sum to its printed total, which is the
  exact total rounded, and each team's printed breakdowns sum to the team's printed line (the pages' own builders).
- Billing is bounded by what exists: per cluster, GPU model and hour, the GPU-hours usage rows bill are at most the
  GPUs the cluster has then (declared, else the confirmed GPUs collectors saw).
- The pages' summary is the ledger summed: per day, cluster, team, GPU model and kind of line, the summary
  (`LedgerDay`) holds exactly the ledger's rows' count and sums, no group missing and none extra.
- Waste is a partition of the bill: the findings' waste of a job is at most the job's usage charges, and of a
  team at most the team's.
- Savings are measured, not extrapolated: a finding's savings are at most what its job cost since the window the
  savings were measured over began, a job's findings' at most the job's bill in that window, and a team's open
  findings' at most what the team spent in the same window.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, Max, Min, Q, Sum
from django.utils import timezone

from governance.costs.allocation import seen_part, seen_weight
from governance.costs.contention import allocated_samples
from governance.costs.job_months import AMOUNTS as JOB_AMOUNTS
from governance.costs.job_months import KEY as JOB_KEY
from governance.costs.ledger import AMOUNTS
from governance.costs.models import AllocatedHour, Charge, JobMonth, LedgerDay, MonthClose, StatementLine
from governance.costs.pricing import mig_share
from governance.costs.selectors import reconcile
from governance.costs.summaries import KEY as SUMMARY_KEY
from governance.costs.terms import TermsByMonth
from governance.fleet.models import Gpu
from governance.lib.money import to_cents
from governance.lib.months import Month
from governance.usage.models import Job, JobGpuHour
from governance.usage.node_rollups import node_rollups_drift

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
    from governance.costs.breakdowns import cost_by, team_breakdown
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


HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
# Rows are stored to the micro-GPU-hour: a sum of n of them may pass an exact bound by n x 0.5e-6.
ROUNDING = Decimal("0.000001")


def _hours(lo: datetime, hi: datetime) -> list[tuple[datetime, Decimal]]:
    """Each hour lo..hi touches, with the part of it (in hours) that lies within lo..hi."""
    out = []
    hour = lo.replace(minute=0, second=0, microsecond=0)
    while hour < hi:
        part = min(hi, hour + HOUR) - max(lo, hour)
        out.append((hour, Decimal(part.total_seconds()) / 3600))
        hour += HOUR
    return out


def _capacity_by_hour() -> dict[tuple[str, str, datetime], Decimal]:
    """What each cluster has per model and hour: its declared count in force (the terms its month was priced
    under), else each confirmed GPU from the hour of its first report until an hour after its last, or its grace
    period after it, whichever is later (a bound: pricing may stop sooner)."""
    terms = TermsByMonth()
    out: dict[tuple[str, str, datetime], Decimal] = defaultdict(Decimal)
    days = Charge.objects.filter(kind="usage").values_list("cluster_name", "day").distinct()
    declared_days = set()
    for cluster, day in days:
        month_terms = terms.of(Month(day.year, day.month))
        first = datetime(day.year, day.month, day.day, tzinfo=UTC)
        if not month_terms.declares(cluster, first + timedelta(days=1)):
            continue
        declared_days.add((cluster, day))
        for (where, model), steps in month_terms.declared.items():
            if where != cluster:
                continue
            for i, (since, count) in enumerate(steps):
                upto = steps[i + 1][0] if i + 1 < len(steps) else first + timedelta(days=1)
                lo, hi = max(since, first), min(upto, first + timedelta(days=1))
                for hour, part in _hours(lo, hi) if hi > lo else []:
                    out[(cluster, model, hour)] += part * count
    grace = timedelta(hours=settings.GOVERNANCE_GPU_GONE_AFTER_HOURS)
    gpus = Gpu.objects.filter(unconfirmed=False).values_list(
        "cluster__name", "model", "mig_profile", "first_seen_at", "last_seen_at"
    )
    for cluster, model, profile, first_seen, last_seen in gpus:
        lo = first_seen.replace(minute=0, second=0, microsecond=0)
        hi = max(last_seen.replace(minute=0, second=0, microsecond=0) + HOUR, last_seen + grace)
        for hour, part in _hours(lo, hi):
            if (cluster, hour.date()) not in declared_days:
                out[(cluster, model, hour)] += part * mig_share(model, profile)
    return out


def _whole(hour: datetime, row: dict, closed: set) -> Decimal:
    """The part of an hour pricing reached on the row's day: to its month's end once closed, else to now (frozen in
    the tests)."""
    month = Month(row["day"].year, row["day"].month)
    until = month.end if month.start.date() in closed else timezone.now()
    first = datetime(row["day"].year, row["day"].month, row["day"].day, tzinfo=UTC)
    end = min(hour + HOUR, first + DAY, until)
    return max(Decimal((end - hour).total_seconds()) / 3600, Decimal(0))


def _held(row: dict, runs: list) -> list[tuple[datetime, datetime]]:
    """The stretches of the row's period its job held its GPUs: all of it, or where the job ran more than once (a
    requeued job) only its runs, never the waits between them."""
    lo, hi = row["period_start"], row["period_end"]
    if not runs:
        return [(lo, hi)]
    stretches = [(max(lo, datetime.fromisoformat(a)), min(hi, datetime.fromisoformat(b) if b else hi)) for a, b in runs]
    return [(a, b) for a, b in stretches if b > a]


def _row_hours(row: dict, kept: dict, seen: dict, jobs: dict, closed: set) -> list[tuple[datetime, Decimal]]:
    """The hours of one usage row: what allocation kept for it, else the job's own claim over the row's period (its
    declared count, else the GPUs its samples show), which must add up to the row."""
    key = (row["job_id"], row["day"], row["gpu_model"], row["mig_profile"])
    if key in kept:
        spread = kept[key]
    else:
        gpus, start, runs = jobs[row["job_id"]]
        share = mig_share(row["gpu_model"], row["mig_profile"])
        span = [hour for lo, hi in _held(row, runs) for hour in _hours(lo, hi)]
        if gpus and start is not None:
            spread = [(hour, part * gpus * share) for hour, part in span]
        else:  # each GPU seen in the hour, or the job's part of one it shared (priced up to now, in an open month)
            shown = seen.get(key, {})
            spread = [
                (hour, sum((seen_part(part, _whole(hour, row, closed), w) for w in shown.get(hour, [])), Decimal(0))
                 * share)
                for hour, part in span
            ]  # fmt: skip
    total = sum((h for _, h in spread), Decimal(0))
    assert abs(total - row["gpu_hours"]) <= ROUNDING * (len(spread) + 1), (
        f"job {row['job_ref']} on {row['day']} is billed {row['gpu_hours']} GPU-hours of {row['gpu_model']} but its"
        f" hours add up to {total}"
    )
    return spread


def assert_billed_within_capacity() -> None:
    """Per cluster, model and hour over every billed month: the GPU-hours billed <= the GPUs that exist."""
    rows = list(
        Charge.objects.filter(kind="usage", gpu_hours__gt=0).values(
            "job_id", "job_ref", "cluster_name", "day", "gpu_model", "mig_profile", "period_start", "period_end",
            "gpu_hours",
        )
    )  # fmt: skip
    if not rows:
        return
    kept: dict[tuple, list[tuple[datetime, Decimal]]] = defaultdict(list)
    for r in AllocatedHour.objects.values("job_id", "day", "gpu_model", "mig_profile", "hour", "gpu_hours"):
        kept[(r["job_id"], r["day"], r["gpu_model"], r["mig_profile"])].append((r["hour"], r["gpu_hours"]))
    seen: dict[tuple, dict[datetime, list[Decimal]]] = defaultdict(lambda: defaultdict(list))
    ids = {r["job_id"] for r in rows}
    rollups = JobGpuHour.objects.filter(job_id__in=ids).annotate(allocated=allocated_samples())
    for job, hour, model, profile, samples, allocated in rollups.values_list(
        "job_id", "hour", "gpu__model", "gpu__mig_profile", "samples", "allocated"
    ):
        seen[(job, hour.date(), model, profile)][hour].append(seen_weight(samples, allocated))
    jobs = {pk: (gpus, start, runs) for pk, gpus, start, runs in Job.objects.filter(pk__in=ids).values_list(
        "pk", "gpus", "start_time", "runs")}  # fmt: skip
    closed = set(MonthClose.objects.values_list("month", flat=True))
    billed: dict[tuple[str, str, datetime], Decimal] = defaultdict(Decimal)
    count: dict[tuple[str, str, datetime], int] = defaultdict(int)
    for row in rows:
        for hour, hours in _row_hours(row, kept, seen, jobs, closed):
            billed[(row["cluster_name"], row["gpu_model"], hour)] += hours
            count[(row["cluster_name"], row["gpu_model"], hour)] += 1
    capacity = _capacity_by_hour()
    over = {
        f"{c} {m} {h:%Y-%m-%d %H}h": (str(b), str(capacity.get((c, m, h), 0)))
        for (c, m, h), b in billed.items()
        if b > capacity.get((c, m, h), Decimal(0)) + ROUNDING * count[(c, m, h)]
    }
    assert not over, f"hours billed beyond the GPUs that exist (billed, capacity): {dict(list(over.items())[:10])}"


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


def assert_summaries_equal_ledger() -> None:
    # The summary's sums of the rows on a share of one GPU too (a team month's spend on shared GPUs).
    on_share = Q(gpu_share__isnull=False)
    shared = {"shared_gpu_hours": Sum("gpu_hours", filter=on_share), "shared_cost": Sum("cost", filter=on_share)}
    ledger = {
        tuple(r[k] for k in SUMMARY_KEY): (r["n"], *(r[f"s_{a}"] for a in AMOUNTS), *(r[n] or 0 for n in shared))
        for r in Charge.objects.values(*SUMMARY_KEY)
        .annotate(n=Count("id"), **{f"s_{a}": Sum(a) for a in AMOUNTS}, **shared).order_by()
    }  # fmt: skip
    summary = [
        (tuple(r[k] for k in SUMMARY_KEY), (r["rows"], *(r[a] for a in AMOUNTS), *(r[n] for n in shared)))
        for r in LedgerDay.objects.values(*SUMMARY_KEY, "rows", *AMOUNTS, *shared)
    ]
    assert len(summary) == len(dict(summary)), "the ledger's summary holds a group twice"
    missing = {k: v for k, v in ledger.items() if dict(summary).get(k) != v}
    extra = {k: v for k, v in summary if k not in ledger}
    assert not missing and not extra, f"the summary differs from the ledger: ledger {missing}, summary only {extra}"


def assert_job_months_equal_ledger() -> None:
    """Each job's usage rows of a month, summed per team, user and cluster, are the job-month summary's rows, and
    each of a job's rows of a month counts them (job_rows)."""
    amounts = {f"s_{a}": Sum(a) for a in JOB_AMOUNTS}
    ledger = {
        tuple(r[k] for k in JOB_KEY): (r["n"], r["first"], r["last"], *(r[f"s_{a}"] for a in JOB_AMOUNTS))
        for r in Charge.objects.filter(kind="usage", job__isnull=False).values(*JOB_KEY)
        .annotate(n=Count("id"), first=Min("day"), last=Max("day"), **amounts).order_by()
    }  # fmt: skip
    summary = [
        (tuple(r[k] for k in JOB_KEY), (r["rows"], r["first_day"], r["last_day"], *(r[a] for a in JOB_AMOUNTS)))
        for r in JobMonth.objects.values(*JOB_KEY, "rows", "first_day", "last_day", *JOB_AMOUNTS)
    ]
    assert len(summary) == len(dict(summary)), "the job-month summary holds a group twice"
    missing = {k: v for k, v in ledger.items() if dict(summary).get(k) != v}
    extra = {k: v for k, v in summary if k not in ledger}
    assert not missing and not extra, f"the job-months differ from the ledger: ledger {missing}, summary only {extra}"
    counted = JobMonth.objects.values("job_id", "month").annotate(n=Count("id"), lo=Min("job_rows"), hi=Max("job_rows"))
    miscounted = [r for r in counted.order_by() if not r["n"] == r["lo"] == r["hi"]]
    assert not miscounted, f"job-month rows that miscount the job's rows of the month: {miscounted}"


def assert_node_rollups_equal_gpu_hours() -> None:
    """The heatmap's node rollups, folded by ingest, sum each cluster's GPU-hours (per cluster: a GPU that moved
    node keeps its earlier hours on the node it reported from)."""
    drift = node_rollups_drift(per="cluster")
    assert not any(drift.values()), f"the node rollups differ from the GPU-hours at {drift}"


def assert_billing_invariants(before: ClosedTotals | None = None) -> None:
    assert_every_month_reconciles()
    assert_summaries_equal_ledger()
    assert_job_months_equal_ledger()
    assert_node_rollups_equal_gpu_hours()
    assert_billed_within_capacity()
    assert_corrections_well_formed()
    assert_printed_totals_add_up()
    assert_savings_within_spend()
    if before is not None:
        assert_closed_unchanged(before)
