"""Money is Decimal end to end; rounding happens once, on output, half-even to the cent."""

from decimal import ROUND_HALF_EVEN, Decimal

CENT = Decimal("0.01")
SECONDS_PER_HOUR = Decimal(3600)


def to_cents(amount: Decimal) -> Decimal:
    return amount.quantize(CENT, rounding=ROUND_HALF_EVEN)


def format_money(amount: Decimal, currency: str) -> str:
    return f"{to_cents(amount):,.2f} {currency}"
