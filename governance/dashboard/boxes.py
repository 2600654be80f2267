"""A box plot's five numbers: quartiles by linear interpolation between the ordered values (PostgreSQL's
`percentile_cont`, Python's `statistics.quantiles(method="inclusive")`), whiskers at the furthest values within
1.5 x the interquartile range."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Box:
    q1: float
    median: float
    q3: float
    lowerfence: float
    upperfence: float
    count: int


def box_of(values: Sequence[float]) -> Box | None:
    """The box of `values`; None when there are none."""
    ordered = sorted(values)
    if not ordered:
        return None
    if len(ordered) == 1:
        q1 = median = q3 = ordered[0]
    else:
        q1, median, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    spread = 1.5 * (q3 - q1)
    low = min(v for v in ordered if v >= q1 - spread)
    high = max(v for v in ordered if v <= q3 + spread)
    return Box(q1, median, q3, low, high, len(ordered))
