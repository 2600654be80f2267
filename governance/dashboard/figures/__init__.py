"""Pure Plotly figure builders: plain data in, a figure dict out; no ORM, no request.

One module per area (costs, overview, jobs, cluster) so that each page's figures live together.
"""

from typing import Any

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]


def layout(title: str, *, x: dict | None = None, y: dict | None = None, **extra: Any) -> dict:
    """The layout every chart shares: title, axes, a legend under the plot that wraps on narrow screens."""
    return {
        "title": {"text": title},
        "xaxis": x or {},
        "yaxis": y or {},
        "legend": {"orientation": "h", "y": -0.2},
        "margin": {"t": 48, "r": 16, "b": 64, "l": 72},
        "hovermode": "closest",
        **extra,
    }
