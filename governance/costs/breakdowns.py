"""Reads behind the pages, the API and the table CSVs: a month's ledger rows grouped by a column, and its jobs
ranked by cost or by idle cost. Every figure is an aggregate over month_rows (the ledger, or the frozen lines of
a closed month), so the same team, month and job show the same amount on every page and export.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Max, Q, Sum

from governance.costs.ledger import UNALLOCATED, UNATTRIBUTED, ZERO, line_name
from governance.costs.selectors import _currency, month_rows, sku
from governance.lib.months import Month

GROUPS = {"project": ("project_name",), "user": ("user_name",), "model": ("gpu_model", "mig_profile")}
TOP_JOBS = 10


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


@dataclass(frozen=True)
class TeamTotal:
    """A team's month (or the unattributed jobs', or the unallocated line's), on one cluster or all."""

    month: Month
    team_id: int | None
    team: str
    gpu_hours: Decimal
    cost: Decimal
    idle_cost: Decimal
    currency: str

    @property
    def unallocated(self) -> bool:
        return self.team == UNALLOCATED


def team_totals(
    *, month: Month, team_ids: Iterable[int | None] | None = None, cluster_name: str | None = None
) -> list[TeamTotal]:
    """Per team the month's cost and idle cost (corrections and shares included), as the statement adds them;
    the unallocated line (where team_ids allows None) is its own row. One query."""
    rows = month_rows(month, team_ids)
    if cluster_name:
        rows = rows.filter(cluster_name=cluster_name)
    totals = (
        rows.values("team_id", "kind")
        .annotate(name=Max("team_name"), h=Sum("gpu_hours"), c=Sum("cost"), i=Sum("idle_cost"), cur=Max("currency"))
        .order_by()
    )
    merged: dict[tuple[int | None, str], list] = {}
    for r in totals:
        name = r["name"] or UNATTRIBUTED
        if r["team_id"] is None:
            name = UNALLOCATED if r["kind"] == "unallocated" else UNATTRIBUTED
        entry = merged.setdefault((r["team_id"], name), [ZERO, ZERO, ZERO, r["cur"]])
        entry[0] += r["h"] or ZERO
        entry[1] += r["c"] or ZERO
        entry[2] += r["i"] or ZERO
    out = [TeamTotal(month, tid, name, h, c, i, cur) for (tid, name), (h, c, i, cur) in merged.items()]
    return sorted(out, key=lambda t: (t.unallocated, t.team))


def _label(by: str, row: dict) -> str:
    if by == "model":
        return sku(row["gpu_model"], row["mig_profile"]) or "-"
    return line_name(row[GROUPS[by][0]], row["kind"], row["corrected_kind"])


def cost_by(
    *, month: Month, team_ids: Iterable[int | None] | None, by: str, user_name: str | None = None
) -> list[Group]:
    """The month's rows of these teams grouped by project, user or GPU model, most cost first."""
    rows = month_rows(month, team_ids)
    if user_name is not None:
        rows = rows.filter(user_name=user_name, kind="usage")
    currency = _currency(rows)
    grouped = (
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
    rows = month_rows(month, team_ids).filter(kind="usage", job__isnull=False)
    if user_name is not None:
        rows = rows.filter(user_name=user_name)
    if job_ids is not None:
        rows = rows.filter(job_id__in=list(job_ids))
    if cluster_name:
        rows = rows.filter(cluster_name=cluster_name)
    ranked = (
        rows.values("job_id")
        .annotate(
            h=Sum("gpu_hours"), u=Sum("used_gpu_hours"), c=Sum("cost"), i=Sum("idle_cost"), ref=Max("job_ref"),
            cluster=Max("cluster_name"), team=Max("team_name"), project=Max("project_name"), user=Max("user_name"),
            currency=Max("currency"), ih=Sum("idle_gpu_hours"),
        )
        .order_by("-i" if order == "idle" else "-c", "job_id")
    )  # fmt: skip
    if order == "idle":
        ranked = ranked.filter(~Q(i=0))
    if limit is not None:
        ranked = ranked[:limit]
    return [
        JobCost(job_pk=r["job_id"], job_ref=r["ref"], cluster=r["cluster"], team=r["team"] or UNATTRIBUTED,
                project=r["project"] or "", user=r["user"], gpu_hours=r["h"] or ZERO, used_gpu_hours=r["u"] or ZERO,
                cost=r["c"] or ZERO, idle_cost=r["i"] or ZERO, currency=r["currency"], idle_gpu_hours=r["ih"] or ZERO)
        for r in ranked
    ]  # fmt: skip


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
