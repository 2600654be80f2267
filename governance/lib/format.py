"""The one way numbers are written for people: pages, table CSVs and chart labels all call these.

Money: thousands separators, half-even to the cent, the currency on every amount. Hours: one decimal.
Shares: a fraction 0-1 as a percentage with one decimal. None (unknown) is written "n/a", never 0.
"""

from __future__ import annotations

from decimal import Decimal

from governance.lib.money import to_cents

UNKNOWN = "n/a"
HOURS_UNIT = Decimal("0.1")  # hours are printed to one decimal: tables place their tenths with money.printed


def _decimal(value: Decimal | float | int) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(str(value))


def money(amount: Decimal | float | int | None, currency: str) -> str:
    """money(Decimal("13980.855"), "USD") -> '13,980.86 USD'."""
    if amount is None:
        return UNKNOWN
    return f"{to_cents(_decimal(amount)):,.2f} {currency}".strip()


def hours(value: Decimal | float | int | None) -> str:
    """hours(1234.56) -> '1,234.6'."""
    if value is None:
        return UNKNOWN
    return f"{_decimal(value):,.1f}"


def pct(share: Decimal | float | None) -> str:
    """pct(0.1234) -> '12.3%': a share of 1 is 100%."""
    if share is None:
        return UNKNOWN
    return f"{float(share) * 100:,.1f}%"


def number(value: Decimal | float | int | None, digits: int = 1) -> str:
    if value is None:
        return UNKNOWN
    return f"{_decimal(value):,.{digits}f}"


def gpus(value: Decimal | float | int | None) -> str:
    """gpus(Decimal("8.000000")) -> '8', gpus(Decimal("0.470000")) -> '0.47': a job's GPUs or share of one GPU,
    with the digits it has; None (no source knows the count) -> '?'."""
    if value is None:
        return "?"
    d = _decimal(value)
    return f"{d.quantize(Decimal(1)):,}" if d == d.to_integral_value() else f"{d.normalize():,f}"
