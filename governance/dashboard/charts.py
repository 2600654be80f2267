"""What each page shows: selectors' plain data through the downsampler into the pure figure builders."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings

from governance.costs.breakdowns import jobs_month
from governance.costs.selectors import chargeback_by_team
from governance.dashboard import selectors
from governance.dashboard.figures.costs import CostPoint, cost_per_team_per_month
from governance.dashboard.figures.heatmap import gpu_heatmap
from governance.dashboard.figures.overview import (
    INDUSTRY_UTILISATION,
    IdleRow,
    WasteRow,
    idle_cost_share,
    queue_wait_per_team,
    top_jobs_by_waste,
    utilisation_over_time,
)
from governance.dashboard.filters import Filters
from governance.dashboard.grid import GpuGrid, gpu_grid
from governance.fleet.models import Cluster
from governance.lib.downsample import ratio_buckets
from governance.org.models import Team, User
from governance.org.selectors import teams_led, teams_visible

MAX_POINTS = 2000
MAX_HEATMAP_CELLS = 60_000
X_FORMAT = "%Y-%m-%d %H:%M"


@dataclass(frozen=True)
class Chart:
    """One chart on a page: its element id, the figure, and what to say when it has no data."""

    id: str
    figure: dict
    empty: str
    wide: bool = False

    @property
    def figure_id(self) -> str:
        return f"{self.id}-figure"

    @property
    def has_data(self) -> bool:
        return any(_trace_points(t) for t in self.figure["data"])

    @property
    def json_bytes(self) -> int:
        return len(json.dumps(self.figure, separators=(",", ":")))


def _trace_points(trace: dict) -> int:
    if trace.get("type") == "heatmap":
        return sum(v is not None for row in trace.get("z", []) for v in row)
    values = trace.get("q1") or trace.get("y") or []
    return sum(v is not None for v in values)


def overview_charts(f: Filters, user: User) -> tuple[list[Chart], dict]:
    """The overview's charts and headline numbers for these filters, as this user may see them."""
    hours = selectors.cluster_utilisation(start=f.start, end=f.end, cluster_id=f.cluster_id)
    xs, util = ratio_buckets(
        [h.hour.strftime(X_FORMAT) for h in hours],
        [h.used_gpu_hours for h in hours],
        [h.capacity_gpu_hours for h in hours],
        MAX_POINTS,
    )
    used = sum(h.used_gpu_hours for h in hours)
    capacity = sum(h.capacity_gpu_hours for h in hours)

    # Money from the ledger (the statement's rows), so every total here is the statement's for the same filters.
    team_ids, job_scope = _money_scope(user, f.team)
    cluster = f.cluster.name if f.cluster else None
    charges = [t for m in f.months for t in chargeback_by_team(month=m, team_ids=team_ids, cluster_name=cluster)]
    month = [t for t in charges if t.month == f.month]
    currency = next((t.currency for t in charges if t.currency), settings.GOVERNANCE_DEFAULT_CURRENCY)
    teams_month = [t for t in month if not t.unallocated]
    idle_rows = [IdleRow(t.team, t.printed_cost, float(t.idle_cost / t.cost) if t.cost else 0.0) for t in teams_month]
    # The statement's printed lines, so the headline is the sum of what the finance and team pages print.
    total = sum((t.printed_cost for t in month), Decimal(0))
    unallocated = sum((t.printed_cost for t in month if t.unallocated), Decimal(0))
    idle_total = sum((t.printed_idle_cost for t in month), Decimal(0))

    waits = selectors.queue_waits(user=user, start=f.start, end=f.end, cluster_id=f.cluster_id, team=f.team)
    waste = jobs_month(month=f.month, cluster_name=cluster, order="idle", **job_scope)
    waste_rows = [
        WasteRow(f"{w.cluster}/{w.job_ref}", w.team, w.user, float(w.idle_gpu_hours), w.idle_cost) for w in waste
    ]
    charts = [
        Chart(
            "utilisation",
            utilisation_over_time(xs, [None if u is None else u * 100 for u in util]),
            "No GPU readings in this range. Pick another month, point a collector at /api/v1/ingest/, "
            "or load demo data with: python manage.py seed_demo",
            wide=True,
        ),
        Chart(
            "cost-per-team",
            cost_per_team_per_month(
                [CostPoint(str(c.month), c.team, c.printed_cost) for c in charges if not c.unallocated], currency
            ),
            "No cost in the six months up to this one. Check that rate cards exist for your GPU models.",
        ),
        Chart(
            "idle-cost",
            idle_cost_share(idle_rows, currency),
            f"No cost in {f.month}. Pick a month with usage.",
        ),
        Chart(
            "queue-wait",
            queue_wait_per_team(waits),
            "No job started in this range, or the scheduler did not report submit times.",
        ),
        Chart(
            "top-waste",
            top_jobs_by_waste(waste_rows, currency),
            f"No job you may see held an idle GPU in {f.month}. Nothing to fix here.",
            wide=True,
        ),
    ]
    headline = {
        "utilisation": used / capacity if capacity else None,
        "industry": INDUSTRY_UTILISATION / 100,
        "cost": total,
        "unallocated": unallocated,
        "idle_cost": idle_total,
        "idle_share": float(idle_total / total) if total else None,
        "currency": currency,
        "waste": waste,
        "team_costs": {t.team_id: t.printed_cost for t in teams_month if t.team_id is not None},
    }
    return charts, headline


def _money_scope(user: User, team: Team | None) -> tuple[list[int] | None, dict]:
    """(team ids whose totals the user may see, the jobs' scope for job lists) for the overview's money.

    Finance and admins with no team chosen: every row, the unallocated line included. Leads: their teams' jobs;
    engineers: their teams' totals and their own jobs."""
    if user.sees_all_costs and team is None:
        return None, {"team_ids": None}
    visible = teams_visible(user=user)
    if team is not None:
        visible = visible.filter(pk=team.pk)
    ids = list(visible.values_list("pk", flat=True))
    led = teams_led(user=user).filter(pk__in=ids)
    if user.sees_all_costs or led.exists():
        return ids, {"team_ids": list(led.values_list("pk", flat=True))}
    return ids, {"team_ids": ids, "user_name": user.username}


def heatmap_chart(f: Filters, cluster: Cluster, user: User, node: str | None = None) -> tuple[Chart, GpuGrid]:
    grid = gpu_grid(cluster_id=cluster.pk, start=f.start, end=f.end, node=node, max_cells=MAX_HEATMAP_CELLS)
    labels = grid.rows
    if grid.per == "gpu":  # who held a GPU is named where a row is one GPU
        holders = selectors.gpu_holders(user=user, cluster_id=cluster.pk, start=f.start, end=f.end)
        labels = [f"{row} · {holders[row]}" if row in holders else row for row in grid.rows]
    # Plotly centres a cell on its x: label each bucket by its middle so it spans the hours it covers.
    half = grid.step / 2
    figure = gpu_heatmap(labels, [(c + half).strftime(X_FORMAT) for c in grid.columns], grid.values)
    chart = Chart("heatmap", figure, f"No GPU of {cluster} reported in this range. Pick another range.", wide=True)
    return chart, grid
