"""Month-end spend forecasts from daily spend: plain numbers in, plain numbers out (no Django).

Methods (the one used at each cut-off day is chosen by the backtest in tests/costs/test_forecast_backtest.py, on
the Helios and DLRM months; governance/costs/forecasts.py `method_for`):
- `naive`: spend so far / days elapsed x days in the month.
- `weekday`: the same run-rate, with day-of-week factors from the history (training starts on weekdays), shrunk
  towards 1 where a weekday has been seen only a few times.
- `recent`: spend so far + the last seven days' mean for each remaining day (follows a level that moved).
The interval (80% by default) is a bootstrap of daily residuals: the remaining days are drawn as a random walk from
the method's level, each step one of the day-to-day changes seen so far (centred), so a team whose spend moves
in steps gets a wide band and a steady one a narrow band.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, timedelta
from itertools import pairwise

NAIVE, WEEKDAY, RECENT = "naive", "weekday", "recent"
METHODS = (NAIVE, WEEKDAY, RECENT)
RECENT_DAYS = 7
SHRINK = 2.0  # pseudo-observations of factor 1 added to each weekday's mean
DRAWS = 400


@dataclass(frozen=True)
class Forecast:
    """What a series is expected to total at month end, with a (low, high) interval and the path to it."""

    spent: float
    forecast: float
    low: float
    high: float
    method: str
    # (day, expected cumulative, low cumulative, high cumulative) for as_of and each day after it
    path: list[tuple[date, float, float, float]]

    def crosses(self, amount: float) -> date | None:
        """The first day the expected spend reaches `amount` (None: not this month)."""
        for day, expected, _, _ in self.path:
            if expected >= amount:
                return day
        return None


def month_days(first: date) -> list[date]:
    nxt = date(first.year + first.month // 12, first.month % 12 + 1, 1)
    return [first + timedelta(days=i) for i in range((nxt - first).days)]


def weekday_factors(history: dict[date, float]) -> list[float]:
    """Each weekday's mean spend over the mean of all days, shrunk towards 1 (Monday first)."""
    if not history:
        return [1.0] * 7
    overall = sum(history.values()) / len(history)
    if overall <= 0:
        return [1.0] * 7
    sums, counts = [0.0] * 7, [0] * 7
    for day, value in history.items():
        sums[day.weekday()] += value / overall
        counts[day.weekday()] += 1
    return [(sums[w] + SHRINK) / (counts[w] + SHRINK) for w in range(7)]


def _quantile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    position = q * (len(sorted_values) - 1)
    lower = int(position)
    upper = min(lower + 1, len(sorted_values) - 1)
    return sorted_values[lower] + (sorted_values[upper] - sorted_values[lower]) * (position - lower)


def month_forecast(
    daily: dict[date, float], *, first: date, as_of: date, method: str = WEEKDAY, coverage: float = 0.8,
    seed: int = 0,
) -> Forecast:  # fmt: skip
    """Forecast the month starting `first` from `daily` spend (days up to and including `as_of` are known; days
    before `first` are history; a missing day spent nothing)."""
    if method not in METHODS:
        raise ValueError(f"method {method!r} is not one of {', '.join(METHODS)}")
    days = month_days(first)
    as_of = min(max(as_of, first - timedelta(days=1)), days[-1])
    seen = [d for d in days if d <= as_of]
    remaining = [d for d in days if d > as_of]
    spent = sum(daily.get(d, 0.0) for d in seen)
    known = {d: v for d, v in daily.items() if d <= as_of}
    if known:
        start = min(known)
        known = {start + timedelta(days=i): known.get(start + timedelta(days=i), 0.0)
                 for i in range((as_of - start).days + 1)}  # fmt: skip
    factors = weekday_factors(known) if method == WEEKDAY else [1.0] * 7
    if seen:
        level = spent / sum(factors[d.weekday()] for d in seen)
        if method == RECENT:
            last = seen[-RECENT_DAYS:]
            level = sum(daily.get(d, 0.0) for d in last) / len(last)
    else:  # nothing of the month yet: the history's level
        level = sum(known.values()) / sum(factors[d.weekday()] for d in known) if known else 0.0
    expected = [level * factors[d.weekday()] for d in remaining]
    forecast = spent + sum(expected)
    if not remaining:
        return Forecast(spent, spent, spent, spent, method, [(as_of, spent, spent, spent)])
    history = sorted(known)
    deseasoned = [known[d] / factors[d.weekday()] for d in history]
    changes = [b - a for a, b in pairwise(deseasoned)]
    walks = _bootstrap(changes, level, [factors[d.weekday()] for d in remaining], random.Random(seed))
    tail = (1 - coverage) / 2
    path = [(as_of, spent, spent, spent)]
    running = spent
    for i, day in enumerate(remaining):
        running += expected[i]
        ends = sorted(walks[i])
        low, high = spent + _quantile(ends, tail), spent + _quantile(ends, 1 - tail)
        path.append((day, running, min(low, running), max(high, running)))
    return Forecast(spent, forecast, path[-1][2], path[-1][3], method, path)


def _bootstrap(changes: list[float], level: float, factors: list[float], rng: random.Random) -> list[list[float]]:
    """Per remaining day, the cumulative spend to it of DRAWS random walks from `level` (never below 0) whose steps
    are the centred day-to-day changes seen so far.

    Day by day over all the walks, with every step drawn up front: a page draws this on each view, and one
    interpreted step at a time cost three times as much."""
    if not changes or level <= 0:
        return [[level * sum(factors[: i + 1])] for i in range(len(factors))]
    drift = sum(changes) / len(changes)
    steps = rng.choices([c - drift for c in changes], k=DRAWS * len(factors))
    values, totals, days = [level] * DRAWS, [0.0] * DRAWS, []
    for day, factor in enumerate(factors):
        values = [v if (v := value + step) > 0 else 0.0
                  for value, step in zip(values, steps[day * DRAWS : (day + 1) * DRAWS], strict=True)]  # fmt: skip
        totals = [total + value * factor for total, value in zip(totals, values, strict=True)]
        days.append(totals)
    return days
