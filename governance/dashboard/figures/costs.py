"""Cost figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from governance.dashboard.figures import PALETTE
from governance.lib.money import to_cents
from governance.lib.text import plain


@dataclass(frozen=True)
class CostPoint:
    month: str
    team: str
    cost: Decimal


def _cents(amount: Decimal) -> float:
    """Money in a figure (and so in its CSV download): to the cent, as every page writes it."""
    return float(to_cents(Decimal(amount)))


def cost_per_team_per_month(points: Sequence[CostPoint], currency: str) -> dict:
    months = sorted({p.month for p in points})
    teams = sorted({p.team for p in points})
    by_key = {(p.team, p.month): p.cost for p in points}
    traces = [
        {
            "type": "bar",
            "name": plain(team),
            "x": months,
            "y": [_cents(by_key.get((team, m), Decimal(0))) for m in months],
            "marker": {"color": PALETTE[i % len(PALETTE)]},
            "hovertemplate": f"%{{x}}<br>%{{fullData.name}}: %{{y:,.2f}} {currency}<extra></extra>",
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


def _layout(title: str, **extra: object) -> dict:
    return {"title": {"text": title}, "margin": {"t": 48, "r": 16, "b": 64, "l": 72}, **extra}


def cost_by(category: str, costs: dict[str, Decimal], currency: str) -> dict:
    """Horizontal bars of cost per project (or GPU model), largest first."""
    ordered = sorted(costs.items(), key=lambda item: item[1])
    return {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "x": [_cents(cost) for _, cost in ordered],
                "y": [plain(name) for name, _ in ordered],
                "marker": {"color": PALETTE[0]},
                "hovertemplate": f"%{{y}}: %{{x:,.2f}} {currency}<extra></extra>",
            }
        ],
        "layout": _layout(
            f"Cost by {category}",
            xaxis={"title": {"text": f"Cost ({currency})"}, "tickformat": ",.0f"},
            yaxis={"automargin": True, "type": "category"},
        ),
    }


def cost_trend(points: Sequence[tuple[str, Decimal, Decimal]], currency: str) -> dict:
    """Cost and idle cost per month (oldest first): points are (month, cost, idle cost)."""
    months = [m for m, _, _ in points]
    return {
        "data": [
            {
                "type": "bar",
                "name": "Cost",
                "x": months,
                "y": [_cents(c) for _, c, _ in points],
                "marker": {"color": PALETTE[0]},
                "hovertemplate": f"%{{x}}: %{{y:,.2f}} {currency}<extra></extra>",
            },
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "Idle cost",
                "x": months,
                "y": [_cents(i) for _, _, i in points],
                "marker": {"color": PALETTE[5]},
                "hovertemplate": f"%{{x}} idle: %{{y:,.2f}} {currency}<extra></extra>",
            },
        ],
        "layout": _layout(
            "Cost over 12 months",
            xaxis={"title": {"text": "Month"}, "type": "category"},
            yaxis={"title": {"text": f"Cost ({currency})"}, "tickformat": ",.0f"},
            legend={"orientation": "h", "y": -0.2},
        ),
    }


def budget_gauge(spent: Decimal, budget: Decimal, currency: str, thresholds: Sequence[int]) -> dict:
    """The month's spend against the budget, with the alert thresholds marked."""
    top = float(max(budget * Decimal("1.2"), spent))
    steps = []
    previous = 0.0
    for i, percent in enumerate(sorted(thresholds)):
        upto = float(budget) * percent / 100
        steps.append({"range": [previous, upto], "color": ["#e8f4ec", "#fdf3dc", "#fbe3d6"][min(i, 2)]})
        previous = upto
    return {
        "data": [
            {
                "type": "indicator",
                "mode": "gauge+number+delta",
                "value": _cents(spent),
                "number": {"suffix": f" {currency}", "valueformat": ",.2f"},
                "delta": {"reference": float(budget), "valueformat": ",.2f"},
                "gauge": {
                    "axis": {"range": [0, top]},
                    "bar": {"color": PALETTE[0]},
                    "steps": steps,
                    "threshold": {"line": {"color": PALETTE[5], "width": 3}, "value": float(budget)},
                },
            }
        ],
        "layout": _layout(f"Budget: {float(budget):,.2f} {currency}"),
    }
