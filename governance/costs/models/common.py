"""What the cost models share: money and hour precisions, and the name of the default rate."""

# A rate card for this model name is the default rate: it prices jobs whose GPU model has no card of its own.
DEFAULT_MODEL = "*"
MONEY = {"max_digits": 24, "decimal_places": 10}
HOURS = {"max_digits": 20, "decimal_places": 6}
