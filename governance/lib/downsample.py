"""Server-side downsampling: consecutive buckets of equal width, so a chart's data stays small at any range.

Buckets keep the first x of each bucket. Ratios are summed before dividing (a bucket of GPU-hours is
weighted by its capacity, never a mean of means); missing values stay missing, so gaps stay visible.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

X = TypeVar("X")


def bucket_width(count: int, max_points: int) -> int:
    """How many consecutive points go into one bucket so that `count` points become at most `max_points`."""
    if max_points < 1:
        raise ValueError("max_points must be at least 1")
    return max(1, math.ceil(count / max_points))


def mean_buckets(xs: Sequence[X], ys: Sequence[float | None], max_points: int) -> tuple[list[X], list[float | None]]:
    """Mean of each bucket's present values; a bucket with none stays None."""
    if len(xs) != len(ys):
        raise ValueError("xs and ys must have the same length")
    width = bucket_width(len(xs), max_points)
    out_x, out_y = [], []
    for i in range(0, len(xs), width):
        present = [y for y in ys[i : i + width] if y is not None]
        out_x.append(xs[i])
        out_y.append(sum(present) / len(present) if present else None)
    return out_x, out_y


def ratio_buckets(
    xs: Sequence[X], numerators: Sequence[float], denominators: Sequence[float], max_points: int
) -> tuple[list[X], list[float | None]]:
    """sum(numerators) / sum(denominators) per bucket; a bucket with nothing to divide by is None."""
    if not len(xs) == len(numerators) == len(denominators):
        raise ValueError("xs, numerators and denominators must have the same length")
    width = bucket_width(len(xs), max_points)
    out_x, out_y = [], []
    for i in range(0, len(xs), width):
        den = sum(denominators[i : i + width])
        out_x.append(xs[i])
        out_y.append(sum(numerators[i : i + width]) / den if den else None)
    return out_x, out_y


def grid_mean_buckets(
    xs: Sequence[X], rows: Sequence[Sequence[float | None]], max_cells: int
) -> tuple[list[X], list[list[float | None]]]:
    """Buckets the columns of a grid (rows x xs) so that it holds at most `max_cells` cells (at least 1 column)."""
    max_columns = max(1, max_cells // max(1, len(rows)))
    out_x: list[X] = mean_buckets(xs, [None] * len(xs), max_columns)[0]
    return out_x, [mean_buckets(xs, row, max_columns)[1] for row in rows]
