"""Pricing arithmetic on plain data: no ORM, no clock (a MIG share reads the deployment's extra profiles)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from fractions import Fraction

from django.conf import settings

from collectors.mig import MigProfile, UnknownMigProfile, mig_fraction_of


@dataclass(frozen=True)
class Rate:
    valid_from: datetime
    price_per_gpu_hour: Decimal
    currency: str


@dataclass(frozen=True)
class Priced:
    gpu_hours: Decimal
    cost: Decimal


MICROSECONDS_PER_HOUR = 3_600_000_000


def gpu_hours(start: datetime, end: datetime, gpus: int | Decimal) -> Decimal:
    if end <= start or gpus <= 0:
        return Decimal(0)
    held = end - start
    microseconds = (held.days * 86_400 + held.seconds) * 1_000_000 + held.microseconds
    return Decimal(microseconds * gpus) / MICROSECONDS_PER_HOUR


def _index_at(rates: Sequence[Rate], moment: datetime) -> int:
    """Index of the rate in force at `moment`; before the first rate, the first one."""
    return max(bisect_right([r.valid_from for r in rates], moment) - 1, 0)


def rate_at(rates: Sequence[Rate], moment: datetime) -> Rate | None:
    """The rate in force at `moment` (rates sorted by valid_from), by the same rule price_interval prices with."""
    return rates[_index_at(rates, moment)] if rates else None


def price_interval(start: datetime, end: datetime, gpus: int | Decimal, rates: Sequence[Rate]) -> Priced:
    """Price `gpus` GPUs held from start to end, each stretch at the rate in force (rates sorted by valid_from).

    Time before the first rate is priced at the first rate; the caller decides what a missing rate means.
    """
    if end <= start or gpus <= 0 or not rates:
        return Priced(gpu_hours(start, end, gpus), Decimal(0))
    if len(rates) == 1 or start >= rates[-1].valid_from:
        hours = gpu_hours(start, end, gpus)
        return Priced(hours, hours * rates[-1].price_per_gpu_hour)
    starts = [r.valid_from for r in rates]
    i = _index_at(rates, start)
    cost = Decimal(0)
    cursor = start
    while cursor < end:
        upto = min(end, starts[i + 1]) if i + 1 < len(rates) else end
        cost += gpu_hours(cursor, upto, gpus) * rates[i].price_per_gpu_hour
        cursor = upto
        i += 1
    return Priced(gpu_hours(start, end, gpus), cost)


def mig_fraction(gpu_model: str, mig_profile: str, extra: Sequence[MigProfile] | None = None) -> Fraction:
    """The share of a full GPU that a MIG profile holds ('1g.10gb' of 7 = 1/7; no profile = the whole GPU), from
    the one catalogue (collectors/mig.py) and the profiles the deployment adds (`extra`; None: the setting
    MIG_EXTRA_PROFILES). Raises UnknownMigProfile for a profile neither knows: the pass isolates that job-day."""
    if extra is None:
        extra = settings.MIG_EXTRA_PROFILES
    return mig_fraction_of(gpu_model, mig_profile, extra)


def mig_share(gpu_model: str, mig_profile: str) -> Decimal:
    """mig_fraction as a Decimal, for counting GPUs: what a GPU (or MIG instance) adds to capacity, to a claim, to
    a count against declared capacity. A profile neither catalogue knows counts as no share (0): it is no capacity
    and no claim, and pricing its job-day calls mig_fraction, which raises, so that job-day fails and is listed."""
    try:
        fraction = mig_fraction(gpu_model, mig_profile)
    except UnknownMigProfile:
        return Decimal(0)
    return Decimal(fraction.numerator) / fraction.denominator


def scale(amount: Decimal, fraction: Fraction) -> Decimal:
    if fraction.denominator == 1 and fraction.numerator == 1:
        return amount
    return amount * fraction.numerator / fraction.denominator


@dataclass(frozen=True)
class Card:
    """A rate card as plain data: cluster None means every cluster; gpu_model '*' is the default rate."""

    gpu_model: str
    cluster: str | None
    rate: Rate
    energy_price_per_kwh: Decimal | None = None


@dataclass(frozen=True)
class Pricing:
    rates: tuple[Rate, ...]
    at_default: bool
    energy_price_per_kwh: Decimal | None


class RateBook:
    """Finds the rates that price a GPU model on a cluster: its own cards, else the cluster's default, else none."""

    def __init__(self, cards: Sequence[Card], default_model: str = "*") -> None:
        self._cards: dict[tuple[str, str | None], list[Card]] = {}
        for card in sorted(cards, key=lambda c: c.rate.valid_from):
            self._cards.setdefault((card.gpu_model, card.cluster), []).append(card)
        self._default = default_model
        self._memo: dict[tuple[str, str], Pricing] = {}

    def pricing(self, cluster: str, gpu_model: str) -> Pricing:
        key = (cluster, gpu_model)
        if key not in self._memo:
            self._memo[key] = self._find(cluster, gpu_model)
        return self._memo[key]

    def _find(self, cluster: str, gpu_model: str) -> Pricing:
        for model, at_default in ((gpu_model, False), (self._default, True)):
            for where in (cluster, None):
                cards = self._cards.get((model, where))
                if cards:
                    energy = cards[-1].energy_price_per_kwh
                    return Pricing(tuple(c.rate for c in cards), at_default, energy)
        return Pricing((), True, None)

    def currencies(self) -> set[str]:
        return {c.rate.currency for cards in self._cards.values() for c in cards}
