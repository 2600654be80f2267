"""Cost figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from governance.dashboard.figures import PALETTE
from governance.lib import format as fmt
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


# The budget states' colours (governance/dashboard/budgets.py): under, near, over.
STATE_COLOURS = {"green": "#009E73", "amber": "#E69F00", "red": "#D55E00", "grey": "#999999"}


def budget_bar(spent: Decimal, budget: Decimal, currency: str, colour: str, forecast: Decimal | None = None) -> dict:
    """The month's spend (and its month-end forecast) as bars against the budget's line, in the state's colour."""
    names = ["Spent"] + (["Forecast"] if forecast is not None else [])
    values = [_cents(spent)] + ([_cents(forecast)] if forecast is not None else [])
    top = max([*values, float(budget)]) * 1.15
    return {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "name": "Budget",
                "y": names,
                "x": values,
                "marker": {"color": [STATE_COLOURS.get(colour, STATE_COLOURS["grey"]), "#c9d3e0"][: len(values)]},
                "hovertemplate": f"%{{y}}: %{{x:,.2f}} {currency}<extra></extra>",
            }
        ],
        "layout": _layout(
            f"Budget: {fmt.money(budget, currency)}",
            xaxis={"title": {"text": f"Cost ({currency})"}, "tickformat": ",.0f", "range": [0, round(top, 2)]},
            yaxis={"type": "category", "autorange": "reversed", "automargin": True},
            shapes=[
                {
                    "type": "line",
                    "xref": "x",
                    "yref": "paper",
                    "x0": float(budget),
                    "x1": float(budget),
                    "y0": 0,
                    "y1": 1,
                    "line": {"color": "#1d2330", "width": 2, "dash": "dash"},
                }
            ],
            showlegend=False,
            height=220,
        ),
    }
