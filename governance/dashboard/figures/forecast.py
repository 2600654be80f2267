"""The month-end forecast: spend so far (line), the forecast with its 80% band, and the budget (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from decimal import Decimal

from governance.dashboard.figures import PALETTE


def forecast_figure(
    *, title: str, actual: Sequence[tuple[date, Decimal]], path: Sequence[tuple[date, float, float, float]],
    currency: str, budget: Decimal | None = None,
) -> dict:  # fmt: skip
    """`actual`: cumulative spend per day up to the cut-off; `path`: (day, expected, low, high) cumulative from the
    cut-off to month end; `budget`: drawn as a flat line over the month."""
    days = [d.isoformat() for d, *_ in path]
    money = f"%{{y:,.2f}} {currency}<extra></extra>"
    traces: list[dict] = [
        {"type": "scatter", "mode": "lines", "name": "80% interval (high)", "x": days,
         "y": [round(h, 2) for *_, h in path], "line": {"width": 0, "color": PALETTE[1]}, "showlegend": False,
         "hovertemplate": f"%{{x}} high: {money}"},
        {"type": "scatter", "mode": "lines", "name": "80% interval", "x": days,
         "y": [round(lo, 2) for _, _, lo, _ in path],
         "fill": "tonexty", "fillcolor": "rgba(120, 144, 200, 0.25)", "line": {"width": 0, "color": PALETTE[1]},
         "hovertemplate": f"%{{x}} low: {money}"},
        {"type": "scatter", "mode": "lines", "name": "Forecast", "x": days, "y": [round(e, 2) for _, e, _, _ in path],
         "line": {"dash": "dash", "color": PALETTE[1]}, "hovertemplate": f"%{{x}} forecast: {money}"},
        {"type": "scatter", "mode": "lines+markers", "name": "Spent", "x": [d.isoformat() for d, _ in actual],
         "y": [float(v) for _, v in actual], "line": {"color": PALETTE[0]}, "hovertemplate": f"%{{x}}: {money}"},
    ]  # fmt: skip
    if budget is not None:
        span = [d.isoformat() for d, _ in actual[:1]] + days[-1:]
        traces.append({"type": "scatter", "mode": "lines", "name": "Budget", "x": span,
                       "y": [float(budget)] * len(span), "line": {"color": PALETTE[5], "width": 2},
                       "hovertemplate": f"budget: {money}"})  # fmt: skip
    # The axis fits the spend, the forecast and the budget; the interval's band is clipped where it runs past them,
    # so a wide band never flattens the month's line at the bottom.
    top = max([float(v) for _, v in actual] + [e for _, e, _, _ in path] + ([float(budget)] if budget else []) + [1.0])
    return {
        "data": traces,
        "layout": {
            "title": {"text": title},
            "xaxis": {"title": {"text": "Day"}, "type": "date"},
            "yaxis": {
                "title": {"text": f"Cumulative cost ({currency})"},
                "tickformat": ",.0f",
                "range": [0, round(top * 1.15, 2)],
            },
            "legend": {"orientation": "h", "y": -0.2},
            "margin": {"t": 48, "r": 16, "b": 64, "l": 72},
        },
    }
