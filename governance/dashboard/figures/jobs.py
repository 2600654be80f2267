"""Job figures: a per-GPU timeline of SM utilisation, peak memory and mean power, hour by hour."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from governance.dashboard.figures import PALETTE
from governance.lib.text import plain


@dataclass(frozen=True)
class GpuHourPoint:
    gpu: str
    hour: datetime
    sm_percent: float | None
    mem_gib: float | None
    power_w: float | None


PANELS = (("sm_percent", "SM %", "y"), ("mem_gib", "Memory GiB", "y2"), ("power_w", "Power W", "y3"))


def job_timeline(points: Sequence[GpuHourPoint]) -> dict:
    gpus = sorted({p.gpu for p in points})
    traces = []
    for i, gpu in enumerate(gpus):
        mine = sorted((p for p in points if p.gpu == gpu), key=lambda p: p.hour)
        for field, label, axis in PANELS:
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": plain(gpu),
                    "legendgroup": plain(gpu),
                    "showlegend": field == "sm_percent",
                    "x": [p.hour.isoformat() for p in mine],
                    "y": [getattr(p, field) for p in mine],
                    "yaxis": axis,
                    "line": {"color": PALETTE[i % len(PALETTE)], "shape": "hv"},
                    "hovertemplate": f"%{{x}}<br>%{{fullData.name}}: %{{y:.1f}} {label.split()[-1]}<extra></extra>",
                }
            )
    return {
        "data": traces,
        "layout": {
            "title": {"text": "Per GPU, hour by hour"},
            "grid": {"rows": 3, "columns": 1, "pattern": "coupled"},
            "xaxis": {"title": {"text": "Hour (UTC)"}},
            "yaxis": {"title": {"text": "SM %"}, "range": [0, 100]},
            "yaxis2": {"title": {"text": "Memory GiB"}, "rangemode": "tozero"},
            "yaxis3": {"title": {"text": "Power W"}, "rangemode": "tozero"},
            "legend": {"orientation": "h", "y": -0.15},
            "margin": {"t": 48, "r": 16, "b": 64, "l": 72},
            "height": 640,
        },
    }


def idle_strip(points: Sequence[GpuHourPoint], idle_sm: float) -> dict:
    """The hours each GPU sat idle (mean SM under `idle_sm`) as a strip: one row per GPU, one cell per hour;
    an hour whose SM is unknown stays blank."""
    gpus = sorted({p.gpu for p in points})
    hours = sorted({p.hour for p in points})
    cell = {(p.gpu, p.hour): p.sm_percent for p in points}
    z = [[None if (sm := cell.get((gpu, h))) is None else (1 if sm < idle_sm else 0) for h in hours] for gpu in gpus]
    return {
        "data": [
            {
                "type": "heatmap",
                "x": [h.isoformat() for h in hours],
                "y": [plain(g) for g in gpus],
                "z": z,
                "zmin": 0,
                "zmax": 1,
                "colorscale": [[0, "#d9e7d0"], [0.5, "#d9e7d0"], [0.5, PALETTE[1]], [1, PALETTE[1]]],
                "showscale": False,
                "xgap": 1,
                "ygap": 2,
                "hovertemplate": "%{x}<br>%{y}: %{z}<extra>1 = idle</extra>",
            }
        ],
        "layout": {
            "title": {"text": f"Idle hours (mean SM under {idle_sm:g}%)"},
            "xaxis": {"title": {"text": "Hour (UTC)"}},
            "yaxis": {"automargin": True},
            "margin": {"t": 40, "r": 16, "b": 48, "l": 72},
            "height": 120 + 24 * len(gpus),
        },
    }
