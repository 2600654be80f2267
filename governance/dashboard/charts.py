"""What each page shows: selectors' plain data through the downsampler into the pure figure builders."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings

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
from governance.fleet.models import Cluster
from governance.lib.downsample import grid_mean_buckets, ratio_buckets
from governance.org.models import User

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

    charges = selectors.team_charges(user=user, months=f.months, team=f.team)
    currency = charges[0].currency if charges else settings.GOVERNANCE_DEFAULT_CURRENCY
    month_cost = {c.team: c.cost for c in charges if c.month == f.month}
    idle = {
        t.team: t
        for t in selectors.team_idle(
            user=user, start=f.month.start, end=f.month.end, cluster_id=f.cluster_id, team=f.team
        )
    }
    idle_rows = [
        IdleRow(team, cost, idle[team].idle_gpu_hours / idle[team].observed_gpu_hours if team in idle else 0.0)
        for team, cost in sorted(month_cost.items())
    ]
    total = sum(month_cost.values(), Decimal(0))
    idle_total = sum((r.cost * Decimal(str(r.idle_share)) for r in idle_rows), Decimal(0))

    waits = selectors.queue_waits(user=user, start=f.start, end=f.end, cluster_id=f.cluster_id, team=f.team)
    waste = selectors.jobs_top_waste(user=user, start=f.start, end=f.end, cluster_id=f.cluster_id, team=f.team)

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
            cost_per_team_per_month([CostPoint(str(c.month), c.team, c.cost) for c in charges], currency),
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
            top_jobs_by_waste(
                [WasteRow(w.job, w.team, w.user, w.idle_gpu_hours, w.idle_cost) for w in waste], currency
            ),
            "No job you may see held an idle GPU in this range. Nothing to fix here.",
            wide=True,
        ),
    ]
    headline = {
        "utilisation": used / capacity if capacity else None,
        "industry": INDUSTRY_UTILISATION / 100,
        "cost": total,
        "idle_cost": idle_total,
        "idle_share": float(idle_total / total) if total else None,
        "currency": currency,
        "waste": waste,
    }
    return charts, headline


def heatmap_chart(f: Filters, cluster: Cluster) -> Chart:
    grid = selectors.gpu_grid(cluster_id=cluster.pk, start=f.start, end=f.end)
    columns, values = grid_mean_buckets(grid.columns, grid.values, MAX_HEATMAP_CELLS)
    # Plotly centres a cell on its x: label each bucket by its middle so it spans the hours it covers.
    half = (columns[1] - columns[0]) / 2 if len(columns) > 1 else grid.step / 2
    figure = gpu_heatmap(grid.rows, [(c + half).strftime(X_FORMAT) for c in columns], values)
    return Chart("heatmap", figure, f"No GPU of {cluster} reported in this range. Pick another range.", wide=True)
