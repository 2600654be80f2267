"""Money is Decimal end to end; rounding happens once, on output, half-even to the cent.

A table of amounts is printed with `printed`: each line rounded once, and the cents the rounding moves placed by
largest remainder, so the printed lines add up to the printed total and that total is the exact total rounded.
"""

from collections.abc import Sequence
from decimal import ROUND_FLOOR, ROUND_HALF_EVEN, Decimal

CENT = Decimal("0.01")
SECONDS_PER_HOUR = Decimal(3600)


def to_cents(amount: Decimal) -> Decimal:
    return amount.quantize(CENT, rounding=ROUND_HALF_EVEN)


def format_money(amount: Decimal, currency: str) -> str:
    return f"{to_cents(amount):,.2f} {currency}"


def printed(amounts: Sequence[Decimal], total: Decimal | None = None, unit: Decimal = CENT) -> list[Decimal]:
    """The amounts as printed, in `unit`s (cents by default): they add up to `total` (default: the exact sum
    rounded half-even), each within one unit of its exact amount where `total` is within one unit of the sum.

    Largest remainder: every amount is floored to the unit, and the units still missing go to the largest
    remainders, ties to the earlier line (a page and its CSV list lines in the same order, so they agree).

    printed([Decimal("0.005"), Decimal("0.005")]) -> [Decimal("0.01"), Decimal("0.00")]
    """
    if not amounts:
        return []
    target = (sum(amounts, Decimal(0)) if total is None else total).quantize(unit, rounding=ROUND_HALF_EVEN)
    floors = [a.quantize(unit, rounding=ROUND_FLOOR) for a in amounts]
    missing = int((target - sum(floors, Decimal(0))) / unit)
    # A total below the floors' sum (a caller's target one unit under) takes units back the same way, evenly.
    each, rest = divmod(missing, len(amounts))
    by_remainder = sorted(range(len(amounts)), key=lambda i: (-(amounts[i] - floors[i]), i))
    extra = set(by_remainder[:rest])
    return [floors[i] + unit * (each + (1 if i in extra else 0)) for i in range(len(amounts))]
