"""What a utilisation figure measures, defined once: its name and the one line a page shows on hover.

Every scope divides the same numerator, the GPU-hours weighted by how busy each GPU was (its mean SM activity in
the hour: an hour at 40% counts 0.4), by the GPU-hours of that scope: a cluster's, every GPU that reported (idle and
unallocated ones too); a team's or a job's, the GPU-hours its jobs held (what it is billed for).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal


@dataclass(frozen=True)
class Measure:
    name: str
    explanation: str


CLUSTER = Measure(
    "Cluster utilisation",
    "Busy GPU-hours (each GPU-hour weighted by its mean SM activity) / GPU-hours of every GPU that reported, "
    "idle and unallocated ones included.",
)
TEAM = Measure(
    "Team utilisation",
    "Busy GPU-hours (each GPU-hour weighted by its mean SM activity) / GPU-hours the team's jobs held and were "
    "billed for.",
)
JOB = Measure(
    "Job utilisation",
    "Busy GPU-hours (each GPU-hour weighted by its mean SM activity) / GPU-hours the job held and was billed for.",
)
MEASURES = {"cluster": CLUSTER, "team": TEAM, "job": JOB}


def share(busy: float | Decimal | None, of: float | Decimal | None) -> float | None:
    """busy / of, or None (unknown) when nothing was held or reported."""
    if busy is None or not of:
        return None
    return float(busy) / float(of)


def clusters_share(*, cluster_ids: list[int], start: datetime, end: datetime) -> float | None:
    """The clusters' utilisation over [start, end) taken together (their busy GPU-hours over their reported ones)."""
    from governance.dashboard.selectors import cluster_utilisation

    busy = capacity = 0.0
    for cluster_id in cluster_ids:
        for hour in cluster_utilisation(start=start, end=end, cluster_id=cluster_id):
            busy += hour.used_gpu_hours
            capacity += hour.capacity_gpu_hours
    return share(busy, capacity)
