"""Overview figures: cluster utilisation against the industry line, idle cost, queue wait, wasteful jobs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from governance.dashboard.boxes import Box
from governance.dashboard.figures import PALETTE, layout
from governance.dashboard.utilisation import CLUSTER
from governance.lib.text import plain

INDUSTRY_UTILISATION = 40.0


@dataclass(frozen=True)
class IdleRow:
    team: str
    cost: Decimal
    idle_share: float


@dataclass(frozen=True)
class WasteRow:
    job: str
    team: str
    user: str
    idle_gpu_hours: float
    idle_cost: Decimal


def utilisation_over_time(
    hours: Sequence[str], utilisation: Sequence[float | None], industry: float = INDUSTRY_UTILISATION
) -> dict:
    """Cluster utilisation (%) per time bucket, with the industry's typical level as a dashed line."""
    traces = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": CLUSTER.name,
            "x": list(hours),
            "y": [None if u is None else round(u, 2) for u in utilisation],
            "line": {"color": PALETTE[0], "width": 2},
            "connectgaps": False,
            "hovertemplate": "%{x}<br>%{y:.1f}% of capacity<extra></extra>",
        }
    ]
    if hours:
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"Industry, mature clusters ({industry:.0f}%)",
                "x": [hours[0], hours[-1]],
                "y": [industry, industry],
                "line": {"color": PALETTE[5], "dash": "dash", "width": 2},
                "hovertemplate": f"Industry: {industry:.0f}%<extra></extra>",
            }
        )
    return {
        "data": traces,
        "layout": layout(
            CLUSTER.name,
            x={"title": {"text": "Time (UTC)"}, "type": "date"},
            y={"title": {"text": "Busy GPU-hours / GPU-hours reported (%)"}, "range": [0, 100]},
        ),
    }


def idle_cost_share(rows: Sequence[IdleRow], currency: str) -> dict:
    """Per team, its cost split into the part spent while GPUs were busy and the part spent idle."""
    teams = [plain(r.team) for r in rows]
    idle = [r.cost * Decimal(str(r.idle_share)) for r in rows]
    busy = [r.cost - i for r, i in zip(rows, idle, strict=True)]
    shares = [round(r.idle_share * 100, 1) for r in rows]
    traces = [
        {
            "type": "bar",
            "orientation": "h",
            "name": name,
            "y": teams,
            "x": [round(float(v), 2) for v in values],
            "customdata": shares,
            "marker": {"color": colour},
            "hovertemplate": f"%{{y}}: %{{x:,.2f}} {currency} {name.lower()}"
            "<br>idle share %{customdata}%<extra></extra>",
        }
        for name, values, colour in (("Busy", busy, PALETTE[0]), ("Idle", idle, PALETTE[1]))
    ]
    return {
        "data": traces,
        "layout": layout(
            "Idle cost share per team",
            barmode="stack",
            x={"title": {"text": f"Cost ({currency})"}, "tickformat": ",.0f"},
            y={"type": "category", "automargin": True},
        ),
    }


def queue_wait_per_team(waits: Mapping[str, Box | None]) -> dict:
    """Minutes from submit to start as one box per team (its five numbers only, so the page stays small)."""
    traces = []
    for i, (team, box) in enumerate(sorted(waits.items())):
        if box is None or not box.count:
            continue
        stats = {"q1": box.q1, "median": box.median, "q3": box.q3, "lowerfence": box.lowerfence,
                 "upperfence": box.upperfence}  # fmt: skip
        traces.append(
            {
                "type": "box",
                "name": plain(team),
                "x": [plain(team)],
                **{k: [round(v, 1)] for k, v in stats.items()},
                "hovertext": [f"{box.count} job{'' if box.count == 1 else 's'}"],
                "marker": {"color": PALETTE[i % len(PALETTE)]},
                "boxpoints": False,
                "hoverinfo": "y+name+text",
            }
        )
    return {
        "data": traces,
        "layout": layout(
            "Queue wait per team (submit to start)",
            x={"type": "category", "title": {"text": "Team"}},
            y={"title": {"text": "Minutes"}, "rangemode": "tozero"},
            showlegend=False,
        ),
    }


def top_jobs_by_waste(rows: Sequence[WasteRow], currency: str) -> dict:
    """The jobs that wasted most, largest on top: idle GPU-hours, with the money in the hover."""
    ordered = list(reversed(rows))
    return {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "name": "Idle GPU-hours",
                "y": [plain(r.job) for r in ordered],
                "x": [round(r.idle_gpu_hours, 2) for r in ordered],
                "customdata": [[plain(r.team), plain(r.user), round(float(r.idle_cost), 2)] for r in ordered],
                "marker": {"color": PALETTE[5]},
                "hovertemplate": "%{y} (%{customdata[0]}, %{customdata[1]})<br>%{x:.1f} idle GPU-hours"
                f"<br>%{{customdata[2]:,.2f}} {currency}<extra></extra>",
            }
        ],
        "layout": layout(
            "Top jobs by waste",
            x={"title": {"text": "Idle GPU-hours"}},
            y={"type": "category", "automargin": True},
            showlegend=False,
        ),
    }
