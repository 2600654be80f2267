"""What the cost models share: money and hour precisions, and the name of the default rate."""

from typing import TypedDict


class Precision(TypedDict):
    """A DecimalField's digits, spread into the field (`DecimalField(**MONEY)`)."""

    max_digits: int
    decimal_places: int


# A rate card for this model name is the default rate: it prices jobs whose GPU model has no card of its own.
DEFAULT_MODEL = "*"
MONEY: Precision = {"max_digits": 24, "decimal_places": 10}
HOURS: Precision = {"max_digits": 20, "decimal_places": 6}
