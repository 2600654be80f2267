"""Robust anomaly scores of a daily series: how far a day is from the median of the days before it, in MADs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from statistics import median

MAD_TO_SIGMA = 1.4826  # a normal series' standard deviation is 1.4826 MADs


@dataclass(frozen=True)
class Outlier:
    day: date
    value: float
    baseline: float
    score: float


def robust_score(value: float, window: list[float], floor: float) -> tuple[float, float]:
    """(baseline, score): the window's median, and (value - median) / (1.4826 x MAD), the MAD at least `floor`
    so a flat history does not make every wiggle infinite."""
    centre = median(window)
    mad = median(abs(v - centre) for v in window) * MAD_TO_SIGMA
    return centre, (value - centre) / max(mad, floor)


def outliers(
    series: list[tuple[date, float]], *, window: int, min_days: int, threshold: float, floor: float,
    days: set[date] | None = None,
) -> list[Outlier]:  # fmt: skip
    """Days (of `days`, or all) whose |score| over the `window` days before them reaches `threshold`; a day needs
    `min_days` days of history before it is judged."""
    out = []
    for i, (day, value) in enumerate(series):
        if days is not None and day not in days:
            continue
        history = [v for _, v in series[max(0, i - window) : i]]
        if len(history) < min_days:
            continue
        baseline, score = robust_score(value, history, floor)
        if abs(score) >= threshold:
            out.append(Outlier(day, value, baseline, score))
    return out
