"""Waste as a partition of the bill: the GPU-hours each finding says were wasted, priced from the job's ledger.

Every rule measures the unused part of the same held GPU-hours (an idle GPU is also an unused one, a MIG slice
that would do is the unused rest of the GPU), so one rule's hours of a day include those of the rules before it
where they overlap. Each wasted GPU-hour goes to one finding only: in precedence order, a finding gets the hours
its rule claims on a day beyond what the findings before it took, capped at the GPU-hours billed that day. The
money is those hours at that day's ledger price per held GPU-hour (the rate in force then x the MIG fraction),
so a job's waste never exceeds its bill, and neither does a team's. Pure: plain data in, plain data out.

Savings is the same partition over the trailing window (SAVINGS_WINDOW_DAYS up to the day of the evaluation): what
following each finding's advice would have saved over the last 30 days, measured, never extrapolated. So a job's
savings never exceed what it cost in the window, and a team's never exceed what the team spent in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from governance.lib.money import to_cents

PRECEDENCE = (
    "idle_gpu", "overallocated", "mig_fit", "whole_gpu_share_fit", "share_oversized", "inference_oversized",
    "low_utilization",
)  # fmt: skip
ZERO = Decimal(0)
SAVINGS_WINDOW_DAYS = 30


def precedence(rule: str) -> tuple[int, str]:
    """Sort key: the named rules in their order, then the rest by name."""
    return (PRECEDENCE.index(rule) if rule in PRECEDENCE else len(PRECEDENCE), rule)


@dataclass(frozen=True)
class DayBill:
    """What the ledger bills one job for one day: held GPU-hours (a MIG slice's hour counts as one) and cost."""

    held_hours: Decimal
    cost: Decimal

    @property
    def price(self) -> Decimal:
        return self.cost / self.held_hours if self.held_hours else ZERO


@dataclass(frozen=True)
class Waste:
    hours: Decimal
    money: Decimal  # to the cent


def waste_allocate(claims: Mapping[str, Mapping[date, float]], bills: Mapping[date, DayBill]) -> dict[str, Waste]:
    """Each rule's share of the job's bill. Rounding is cumulative, so the findings' cents add up to the rounded
    total, which is never over the bill."""
    covered: dict[date, Decimal] = {}
    out: dict[str, Waste] = {}
    exact_total = ZERO
    cents_total = ZERO
    for rule in sorted(claims, key=precedence):
        hours = money = ZERO
        for day, claimed in claims[rule].items():
            bill = bills.get(day)
            if bill is None or not bill.held_hours or claimed <= 0:
                continue
            claim = min(Decimal(str(round(claimed, 6))), bill.held_hours)
            before = covered.get(day, ZERO)
            share = max(claim - before, ZERO)
            if not share:
                continue
            covered[day] = before + share
            hours += share
            money += share * bill.price
        exact_total += money
        cents = to_cents(exact_total)
        out[rule] = Waste(hours=hours, money=cents - cents_total)
        cents_total = cents
    return out


def savings_window_start(now: datetime) -> date:
    """The first day of the trailing window that ends with the day of `now` (UTC), SAVINGS_WINDOW_DAYS long."""
    return now.date() - timedelta(days=SAVINGS_WINDOW_DAYS - 1)


def savings_allocate(
    claims: Mapping[str, Mapping[date, float]], bills: Mapping[date, DayBill], since: date
) -> dict[str, Waste]:
    """Each rule's share of what the job cost from `since` on: the waste partition, restricted to the window."""
    return waste_allocate(claims, {day: bill for day, bill in bills.items() if day >= since})


def bills_by_day(rows: Iterable[tuple[date, Decimal, Decimal, Fraction]]) -> dict[date, DayBill]:
    """Ledger rows (day, gpu_hours, cost, MIG fraction) of one job, summed per day into held hours and cost."""
    held: dict[date, Decimal] = {}
    cost: dict[date, Decimal] = {}
    for day, gpu_hours, amount, fraction in rows:
        held[day] = held.get(day, ZERO) + (gpu_hours * fraction.denominator / fraction.numerator if fraction else ZERO)
        cost[day] = cost.get(day, ZERO) + amount
    return {day: DayBill(held_hours=held[day], cost=cost[day]) for day in held}
