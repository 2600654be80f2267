"""Cluster figures: cluster utilisation (governance/dashboard/utilisation.py) over time against the target line, and
idle GPU-hours."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from governance.dashboard.figures import PALETTE
from governance.dashboard.utilisation import CLUSTER


@dataclass(frozen=True)
class ClusterHour:
    hour: datetime
    gpus: int
    used_gpu_hours: float
    idle_gpu_hours: float

    @property
    def utilisation(self) -> float:
        return 100 * self.used_gpu_hours / self.gpus if self.gpus else 0.0


def cluster_utilisation(hours: Sequence[ClusterHour], target_percent: float) -> dict:
    ordered = sorted(hours, key=lambda h: h.hour)
    x = [h.hour.isoformat() for h in ordered]
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines",
                "name": CLUSTER.name,
                "x": x,
                "y": [round(h.utilisation, 2) for h in ordered],
                "yaxis": "y2",
                "line": {"color": PALETTE[0], "width": 3},
                "hovertemplate": "%{x}<br>%{y:.1f}% of capacity<extra></extra>",
            },
            {
                "type": "bar",
                "name": "Idle GPU-hours",
                "x": x,
                "y": [round(h.idle_gpu_hours, 3) for h in ordered],
                "marker": {"color": PALETTE[1]},
                "opacity": 0.5,
                "hovertemplate": "%{x}<br>%{y:.2f} idle GPU-hours<extra></extra>",
            },
        ],
        "layout": {
            "title": {"text": f"{CLUSTER.name} (busy GPU-hours / GPU-hours reported)"},
            "xaxis": {"title": {"text": "Hour (UTC)"}},
            # The line rides the overlaying axis so the idle bars never hide it.
            "yaxis": {"title": {"text": "Idle GPU-hours"}, "side": "right", "rangemode": "tozero", "showgrid": False},
            "yaxis2": {
                "title": {"text": "Utilisation %"},
                "overlaying": "y",
                "side": "left",
                "range": [0, 100],
                "tickmode": "linear",
                "tick0": 0,
                "dtick": 20,
            },
            "shapes": [
                {
                    "type": "line",
                    "xref": "paper",
                    "yref": "y2",
                    "x0": 0,
                    "x1": 1,
                    "y0": target_percent,
                    "y1": target_percent,
                    "line": {"color": PALETTE[5], "dash": "dash"},
                },
            ],
            "annotations": [
                {
                    "xref": "paper",
                    "yref": "y2",
                    "x": 0,
                    "y": target_percent,
                    "text": f"{target_percent:g}% (mature deployments)",
                    "showarrow": False,
                    "yshift": 10,
                    "xanchor": "left",
                },
            ],
            "legend": {"orientation": "h", "y": -0.2},
            "margin": {"t": 48, "r": 72, "b": 64, "l": 72},
        },
    }
