"""Cost figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from governance.dashboard.figures import PALETTE


@dataclass(frozen=True)
class CostPoint:
    month: str
    team: str
    cost: Decimal


def cost_per_team_per_month(points: Sequence[CostPoint], currency: str) -> dict:
    months = sorted({p.month for p in points})
    teams = sorted({p.team for p in points})
    by_key = {(p.team, p.month): p.cost for p in points}
    traces = [
        {
            "type": "bar",
            "name": team,
            "x": months,
            "y": [float(by_key.get((team, m), Decimal(0))) for m in months],
            "marker": {"color": PALETTE[i % len(PALETTE)]},
            "hovertemplate": f"%{{x}}<br>{team}: %{{y:,.2f}} {currency}<extra></extra>",
        }
        for i, team in enumerate(teams)
    ]
    return {
        "data": traces,
        "layout": {
            "barmode": "stack",
            "title": {"text": "Cost per team per month"},
            "xaxis": {"title": {"text": "Month"}, "type": "category"},
            "yaxis": {"title": {"text": f"Cost ({currency})"}, "tickformat": ",.0f"},
            "legend": {"orientation": "h", "y": -0.2},
            "margin": {"t": 48, "r": 16, "b": 64, "l": 72},
        },
    }
