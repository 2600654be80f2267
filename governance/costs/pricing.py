"""Pricing arithmetic on plain data: no ORM, no clock."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from governance.lib.money import SECONDS_PER_HOUR


@dataclass(frozen=True)
class Rate:
    valid_from: datetime
    price_per_gpu_hour: Decimal
    currency: str


@dataclass(frozen=True)
class Priced:
    gpu_hours: Decimal
    cost: Decimal


def gpu_hours(start: datetime, end: datetime, gpus: int) -> Decimal:
    if end <= start or gpus <= 0:
        return Decimal(0)
    seconds = Decimal(int((end - start).total_seconds() * 1_000_000)) / 1_000_000
    return seconds * gpus / SECONDS_PER_HOUR


def price_interval(start: datetime, end: datetime, gpus: int, rates: Sequence[Rate]) -> Priced:
    """Price `gpus` GPUs held from start to end, each stretch at the rate in force (rates sorted by valid_from).

    Time before the first rate is priced at the first rate; the caller decides what a missing rate means.
    """
    if end <= start or gpus <= 0 or not rates:
        return Priced(gpu_hours(start, end, gpus), Decimal(0))
    starts = [r.valid_from for r in rates]
    i = max(bisect_right(starts, start) - 1, 0)
    cost = Decimal(0)
    cursor = start
    while cursor < end:
        upto = min(end, starts[i + 1]) if i + 1 < len(rates) else end
        cost += gpu_hours(cursor, upto, gpus) * rates[i].price_per_gpu_hour
        cursor = upto
        i += 1
    return Priced(gpu_hours(start, end, gpus), cost)
