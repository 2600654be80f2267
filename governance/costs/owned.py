"""The hourly rate of GPUs the organisation owns, from what they cost (pure arithmetic, Decimal money).

capex (purchase price - residual value) is spread straight-line over the depreciation months: every month the
same amount to the cent, the last one takes the remainder, so the months add up to the capex exactly. A month's
capex rate is its amount / its hours (months differ in length), rounded to 6 decimals: a GPU held every hour of
the month is charged the month's amount to the cent. Power (mean kW measured x price per kWh) and the overhead
share (of capex + power) are added to each month's rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from governance.lib.money import to_cents
from governance.lib.months import Month

SIX = Decimal("0.000001")


@dataclass(frozen=True)
class MonthRate:
    month: Month
    hours: int
    capex: Decimal  # the month's share of the capex, to the cent
    capex_rate: Decimal  # capex / hours, 6 decimals
    power_rate: Decimal
    overhead_rate: Decimal

    @property
    def rate(self) -> Decimal:
        return self.capex_rate + self.power_rate + self.overhead_rate


@dataclass(frozen=True)
class Derivation:
    capex: Decimal
    months: list[MonthRate]
    mean_kw: Decimal
    power_price_per_kwh: Decimal
    overhead_share: Decimal
    currency: str

    def explain(self) -> list[str]:
        """The arithmetic, line by line, as an admin reads it."""
        first = self.months[0]
        c = self.currency
        return [
            f"capex per GPU = purchase - residual = {self.capex} {c}, over {len(self.months)} months: "
            f"{first.capex} {c} a month (last month {self.months[-1].capex} {c})",
            f"capex rate ({first.month}) = {first.capex} {c} / {first.hours} h = {first.capex_rate} {c}/GPU-h",
            f"power rate = {self.mean_kw} kW measured x {self.power_price_per_kwh} {c}/kWh = "
            f"{first.power_rate} {c}/GPU-h",
            f"overhead rate = {self.overhead_share} x ({first.capex_rate} + {first.power_rate}) = "
            f"{first.overhead_rate} {c}/GPU-h",
            f"rate ({first.month}) = {first.capex_rate} + {first.power_rate} + {first.overhead_rate} = "
            f"{first.rate} {c}/GPU-h",
        ]


def _six(value: Decimal) -> Decimal:
    return value.quantize(SIX, rounding=ROUND_HALF_UP)


def month_hours(month: Month) -> int:
    return int((month.end - month.start).total_seconds() // 3600)


def owned_rate_derive(
    *, purchase: Decimal, residual: Decimal, months: int, start: Month, mean_kw: Decimal, power_price: Decimal,
    overhead_share: Decimal, currency: str,
) -> Derivation:  # fmt: skip
    if months < 1:
        raise ValueError("depreciation_months: at least 1")
    if residual > purchase:
        raise ValueError("residual_value: more than the purchase price")
    capex = to_cents(purchase - residual)
    monthly = to_cents(capex / months)
    power_rate = _six(mean_kw * power_price)
    out, month, given = [], start, Decimal(0)
    for i in range(months):
        amount = monthly if i < months - 1 else capex - given
        given += amount
        hours = month_hours(month)
        capex_rate = _six(amount / hours)
        out.append(
            MonthRate(month, hours, amount, capex_rate, power_rate, _six(overhead_share * (capex_rate + power_rate)))
        )
        month = month.next()
    return Derivation(capex, out, mean_kw, power_price, overhead_share, currency)
