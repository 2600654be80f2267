"""The cluster heatmap: one row per GPU (node:index), one column per time bucket, colour = mean SM %."""

from __future__ import annotations

from collections.abc import Sequence

from governance.dashboard.figures import layout
from governance.lib.text import plain

# Cividis: a sequential scale readable with the common colour-vision deficiencies; idle GPUs are dark.
COLORSCALE = "Cividis"
ROW_PX = 14


def gpu_heatmap(rows: Sequence[str], columns: Sequence[str], values: Sequence[Sequence[float | None]]) -> dict:
    return {
        "data": [
            {
                "type": "heatmap",
                "name": "SM utilisation",
                "x": list(columns),
                "y": [plain(row) for row in rows],
                "z": [[None if v is None else round(v, 1) for v in row] for row in values],
                "zmin": 0,
                "zmax": 100,
                "colorscale": COLORSCALE,
                "colorbar": {"title": {"text": "SM %"}},
                "hoverongaps": False,
                "xgap": 0,
                "ygap": 1,
                "hovertemplate": "%{y}<br>%{x}<br>%{z:.1f}% SM<extra></extra>",
            }
        ],
        "layout": layout(
            "GPU utilisation by hour",
            x={"title": {"text": "Time (UTC)"}, "type": "date"},
            y={"type": "category", "autorange": "reversed", "automargin": True},
            height=max(420, min(4000, 120 + ROW_PX * len(rows))),
        ),
    }
