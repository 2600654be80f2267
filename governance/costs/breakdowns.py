"""Reads behind the pages, the API and the table CSVs: a month's ledger rows grouped by a column, and its jobs
ranked by cost or by idle cost. Every figure is an aggregate over month_rows (the ledger, or the frozen lines of
a closed month) or, where no job or user is grouped, over month_sums (an open month's per-day summary, equal to
the ledger's sums: tests/invariants.py), so the same team, month and job show the same amount on every page and
export.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings
from django.db.models import Max, Q, QuerySet, Sum

from governance.costs.ledger import UNATTRIBUTED, ZERO, line_name
from governance.costs.models import JobMonth, LedgerDay
from governance.costs.selectors import _currency, month_closed, month_rows, month_sums, sku
from governance.lib.money import printed
from governance.lib.months import Month

GROUPS = {"project": ("project_name",), "user": ("user_name",), "model": ("gpu_model", "mig_profile")}
TOP_JOBS = 10
ON_SHARE = Q(gpu_share__isnull=False)  # a job's usage on a share of one GPU


@dataclass(frozen=True)
class Group:
    """One line of a breakdown: a project, a user or a GPU model of a month, with its amounts."""

    key: str
    gpu_hours: Decimal
    used_gpu_hours: Decimal
    cost: Decimal
    idle_cost: Decimal
    currency: str

    @property
    def idle_share(self) -> Decimal | None:
        return self.idle_cost / self.cost if self.cost else None


@dataclass(frozen=True)
class JobCost:
    """A job's charges in a month (usage rows only): what the job page, /me/ and the team page show."""

    job_pk: int
    job_ref: str
    cluster: str
    team: str
    project: str
    user: str
    gpu_hours: Decimal
    used_gpu_hours: Decimal
    cost: Decimal
    idle_cost: Decimal
    currency: str
    idle_gpu_hours: Decimal = ZERO

    @property
    def idle_share(self) -> Decimal | None:
        return self.idle_cost / self.cost if self.cost else None


def _label(by: str, row: dict) -> str:
    if by == "model":
        return sku(row["gpu_model"], row["mig_profile"]) or "-"
    return line_name(row[GROUPS[by][0]], row["kind"], row["corrected_kind"])


def cost_by(
    *, month: Month, team_ids: Iterable[int | None] | None, by: str, user_name: str | None = None
) -> list[Group]:
    """The month's rows of these teams grouped by project, user or GPU model, most cost first."""
    close = month_closed(month)
    if by == "user" and close is None:
        grouped = _by_user(month, team_ids, user_name)
        currency = max((r["cur"] for r in grouped if r["cur"]), default=None) or settings.GOVERNANCE_DEFAULT_CURRENCY
    else:
        # By project or model: the month's summary (the frozen lines once closed); a user's own: the ledger's rows.
        rows = month_rows(month, team_ids, close) if user_name is not None else month_sums(month, team_ids, close)
        if user_name is not None:
            rows = rows.filter(user_name=user_name, kind="usage")
        currency = _currency(rows)
        grouped = list(
            rows.values("kind", "corrected_kind", *GROUPS[by])
            .annotate(h=Sum("gpu_hours"), u=Sum("used_gpu_hours"), c=Sum("cost"), i=Sum("idle_cost"))
            .order_by()
        )
    totals: dict[str, list[Decimal]] = {}
    for r in grouped:
        entry = totals.setdefault(_label(by, r), [ZERO, ZERO, ZERO, ZERO])
        for n, k in enumerate("huci"):
            entry[n] += r[k] or ZERO
    groups = [Group(key, h, u, c, i, currency) for key, (h, u, c, i) in totals.items()]
    return sorted(groups, key=lambda g: (-g.cost, g.key))


def _of_teams(rows: QuerySet, team_ids: Iterable[int | None] | None) -> QuerySet:
    if team_ids is None:
        return rows
    ids = list(team_ids)
    known = [i for i in ids if i is not None]
    return rows.filter(Q(team_id__in=known) | Q(team_id__isnull=True) if None in ids else Q(team_id__in=known))


def _by_user(month: Month, team_ids: Iterable[int | None] | None, user_name: str | None) -> list[dict]:
    """An open month's cost by user: the jobs' usage from their per-month sums, every other row (shares,
    corrections, usage of no job) from the ledger, which an index keeps to those few rows."""
    ids = None if team_ids is None else list(team_ids)
    amounts = {"h": Sum("gpu_hours"), "u": Sum("used_gpu_hours"), "c": Sum("cost"), "i": Sum("idle_cost"),
               "cur": Max("currency")}  # fmt: skip
    jobs = _of_teams(JobMonth.objects.filter(month=month.start.date()), ids)
    others = month_rows(month, ids).exclude(kind="usage", job__isnull=False)
    if user_name is not None:
        jobs, others = jobs.filter(user_name=user_name), others.filter(user_name=user_name, kind="usage")
    grouped = [{**r, "kind": "usage", "corrected_kind": ""}
               for r in jobs.values("user_name").annotate(**amounts).order_by()]  # fmt: skip
    return grouped + list(others.values("kind", "corrected_kind", "user_name").annotate(**amounts).order_by())


def jobs_month(
    *,
    month: Month,
    team_ids: Iterable[int | None] | None = None,
    user_name: str | None = None,
    job_ids: Iterable[int] | None = None,
    cluster_name: str | None = None,
    order: str = "cost",
    limit: int | None = TOP_JOBS,
) -> list[JobCost]:
    """The month's jobs of these teams (or of one user, or these jobs) with their charges, by cost or idle cost."""
    close = month_closed(month)
    # An open month's jobs from their per-month sums (a row per job, not per job-day), grouped the same way.
    rows = (
        month_rows(month, team_ids, close).filter(kind="usage", job__isnull=False)
        if close is not None
        else _of_teams(JobMonth.objects.filter(month=month.start.date()), team_ids)
    )
    if user_name is not None:
        rows = rows.filter(user_name=user_name)
    if job_ids is not None:
        rows = rows.filter(job_id__in=list(job_ids))
    if cluster_name:
        rows = rows.filter(cluster_name=cluster_name)
    by = "idle_cost" if order == "idle" else "cost"
    ranked = _top_job_months(rows, by, limit) if close is None and limit is not None else _ranked(rows, by, limit)
    return [
        JobCost(job_pk=r["job_id"], job_ref=r["ref"], cluster=r["cluster"], team=r["team"] or UNATTRIBUTED,
                project=r["project"] or "", user=r["user"], gpu_hours=r["h"] or ZERO, used_gpu_hours=r["u"] or ZERO,
                cost=r["c"] or ZERO, idle_cost=r["i"] or ZERO, currency=r["currency"], idle_gpu_hours=r["ih"] or ZERO)
        for r in ranked
    ]  # fmt: skip


RANKED_BY = {"cost": "c", "idle_cost": "i"}
SUMMED = {"h": "gpu_hours", "u": "used_gpu_hours", "c": "cost", "i": "idle_cost", "ih": "idle_gpu_hours"}
NAMED = {"ref": "job_ref", "cluster": "cluster_name", "team": "team_name", "project": "project_name",
         "user": "user_name", "currency": "currency"}  # fmt: skip


def _by_job(rows: QuerySet, by: str) -> QuerySet:
    """Rows grouped by job and summed; by idle cost, only jobs with some."""
    grouped = rows.values("job_id").annotate(**{k: Sum(f) for k, f in SUMMED.items()},
                                             **{k: Max(f) for k, f in NAMED.items()})  # fmt: skip
    # No model ordering: it would join the job (ordered by the job's own fields) to each part of a union.
    return (grouped.filter(~Q(i=0)) if by == "idle_cost" else grouped).order_by()


def _ranked(rows: QuerySet, by: str, limit: int | None) -> QuerySet:
    """Rows grouped by job, most `by` first (ties by job id), the first `limit` of them."""
    ranked = _by_job(rows, by).order_by(f"-{RANKED_BY[by]}", "job_id")
    return ranked[:limit] if limit is not None else ranked


def _top_job_months(rows: QuerySet, by: str, limit: int) -> QuerySet:
    """`_ranked(rows, by, limit)` over job-months, reading about `limit` rows rather than the month's.

    A job with one row in the month (job_rows = 1) ranks by that row, so the first `limit` such rows in index
    order (jobmonth_month_cost_idx, jobmonth_month_idle_idx) are the first `limit` such jobs; the jobs with several
    rows (re-attributed mid-month: few) are grouped and summed as before. Every job is in one of the two parts,
    each in the order of the whole, so the first `limit` of the two are the first `limit` of all. One statement,
    so both parts see the same rows while a pricing pass rewrites a job's.
    """
    single = rows.filter(job_rows=1)
    if by == "idle_cost":
        single = single.exclude(idle_cost=0)
    first = single.order_by(f"-{by}", "job_id").values("pk")[:limit]
    both = _by_job(rows.filter(pk__in=first), by).union(_by_job(rows.filter(job_rows__gt=1), by), all=True)
    return both.order_by(f"-{RANKED_BY[by]}", "job_id")[:limit]


def job_charges(*, job_id: int) -> JobCost | None:
    """Everything the ledger charges a job, every month it ran (usage rows; closed months as re-priced)."""
    from governance.costs.models import Charge

    rows = Charge.objects.filter(job_id=job_id, kind="usage")
    r = rows.aggregate(
        h=Sum("gpu_hours"), u=Sum("used_gpu_hours"), c=Sum("cost"), i=Sum("idle_cost"), ref=Max("job_ref"),
        cluster=Max("cluster_name"), team=Max("team_name"), project=Max("project_name"), user=Max("user_name"),
        currency=Max("currency"), ih=Sum("idle_gpu_hours"),
    )  # fmt: skip
    if r["c"] is None:
        return None
    return JobCost(job_pk=job_id, job_ref=r["ref"], cluster=r["cluster"], team=r["team"] or UNATTRIBUTED,
                   project=r["project"] or "", user=r["user"], gpu_hours=r["h"], used_gpu_hours=r["u"], cost=r["c"],
                   idle_cost=r["i"], currency=r["currency"], idle_gpu_hours=r["ih"])  # fmt: skip


def month_has_rows(month: Month) -> bool:
    return month_rows(month).exists()


@dataclass(frozen=True)
class Correction:
    """Corrections a month carries for one closed month, one team (or line) and one reason, with their jobs."""

    corrects: Month
    team_id: int | None
    team: str
    reason: str
    gpu_hours: Decimal
    cost: Decimal
    printed_cost: Decimal
    currency: str
    jobs: list[tuple[int, str]]  # (job pk, "cluster/job") of the jobs corrected, at most JOBS_NAMED


JOBS_NAMED = 20


def corrections_landing(*, month: Month) -> list[Correction]:
    """The corrections billed in `month` (those that will land in it while it is open), by the month they correct,
    team and reason, costliest first; printed to the cent so they add up to their printed total."""
    rows = month_rows(month).filter(kind="adjustment")
    grouped = (
        rows.values("corrects", "team_id", "team_name", "reason", "job_id", "job_ref", "cluster_name")
        .annotate(h=Sum("gpu_hours"), c=Sum("cost"), cur=Max("currency"))
        .order_by("corrects", "team_name", "reason", "job_ref")
    )
    groups: dict[tuple, list] = {}
    for r in grouped:
        entry = groups.setdefault(
            (r["corrects"], r["team_id"], r["team_name"], r["reason"]), [ZERO, ZERO, r["cur"], []]
        )
        entry[0] += r["h"] or ZERO
        entry[1] += r["c"] or ZERO
        if r["job_id"] is not None and len(entry[3]) < JOBS_NAMED:
            entry[3].append((r["job_id"], f"{r['cluster_name']}/{r['job_ref']}"))
    ordered = sorted(groups.items(), key=lambda item: (item[0][0], -item[1][1], item[0][2], item[0][3]))
    cents = printed([amounts[1] for _, amounts in ordered])
    return [
        Correction(corrects=Month(first.year, first.month), team_id=team_id, team=name or UNATTRIBUTED, reason=reason,
                   gpu_hours=h, cost=c, printed_cost=cents[n], currency=cur, jobs=jobs)
        for n, ((first, team_id, name, reason), (h, c, cur, jobs)) in enumerate(ordered)
    ]  # fmt: skip


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
    shared_gpu_cost: Decimal = ZERO  # spent on shares of one GPU (time-slicing, MPS, fractional requests)
    shared_gpu_hours: Decimal = ZERO
    by_project: dict[str, Decimal] = field(default_factory=lambda: defaultdict(Decimal))
    by_model: dict[str, Decimal] = field(default_factory=lambda: defaultdict(Decimal))
    lines: dict[tuple[str, str], list[Decimal]] = field(default_factory=dict)
    at_default_rate: set[str] = field(default_factory=set)

    @property
    def shared_gpu_part(self) -> Decimal:
        """The part of the month's cost spent on shares of one GPU (0 to 1)."""
        return self.shared_gpu_cost / self.cost if self.cost > 0 else ZERO

    @property
    def idle_share(self) -> Decimal:
        return self.idle_cost / self.cost if self.cost else ZERO


def team_breakdown(*, month: Month, team_id: int) -> Breakdown:
    rows = month_sums(month, [team_id])
    out = Breakdown(month=month, currency=_currency(rows))
    summed = rows.model is LedgerDay
    shared = Sum("shared_cost") if summed else Sum("cost", filter=ON_SHARE)
    shared_hours = Sum("shared_gpu_hours") if summed else Sum("gpu_hours", filter=ON_SHARE)
    groups = (
        rows.values("kind", "corrected_kind", "project_name", "gpu_model", "mig_profile")
        # the shares first: from then on "cost" and "gpu_hours" name the sums
        .annotate(shared=shared, shared_hours=shared_hours)
        .annotate(hours=Sum("gpu_hours"), used=Sum("used_gpu_hours"), cost=Sum("cost"), idle=Sum("idle_cost"))
        .order_by()
    )
    for g in groups:
        # A correction of a share (or of a commitment line) is labelled as the line it corrects.
        project = line_name(g["project_name"], g["kind"], g["corrected_kind"])
        if g["kind"] == "adjustment":
            project = f"{project} (correction)"
        model = sku(g["gpu_model"], g["mig_profile"]) or "-"
        hours, cost, idle, used = (g[k] or ZERO for k in ("hours", "cost", "idle", "used"))
        out.cost += cost
        out.gpu_hours += hours
        out.idle_cost += idle
        out.used_gpu_hours += used
        out.shared_gpu_cost += g["shared"] or ZERO
        out.shared_gpu_hours += g["shared_hours"] or ZERO
        if g["kind"] == "adjustment":
            out.adjustments += cost
        if g["kind"] == "shared":
            out.unallocated_share += cost
        out.by_project[project] += cost
        out.by_model[model] += cost
        line = out.lines.setdefault((project, model), [ZERO, ZERO, ZERO])
        line[0] += hours
        line[1] += cost
        line[2] += idle
    out.at_default_rate = set(
        month_rows(month, [team_id]).filter(kind="usage", at_default_rate=True).values_list("job_ref", flat=True)
        .order_by().distinct()
    )  # fmt: skip
    return out
