"""Bounds on the time ranges a request may ask for, so that no query string makes a page or an API call
do unbounded work (a range from year 1 to 9999 is 80 million hours)."""

from __future__ import annotations

from datetime import datetime, timedelta

MAX_RANGE_DAYS = 400
FIRST_YEAR, LAST_YEAR = 1970, 2199

RANGE_TOO_LONG = "The range may cover at most {days} days."
START_NOT_BEFORE_END = "start must be before end."
YEAR_OUT_OF_RANGE = "Pick a time between the years {first} and {last}."


def year_problem(moment: datetime) -> str | None:
    """A message if the moment is outside the years any usage can be from, else None."""
    if FIRST_YEAR <= moment.year <= LAST_YEAR:
        return None
    return YEAR_OUT_OF_RANGE.format(first=FIRST_YEAR, last=LAST_YEAR)


def range_problem(start: datetime, end: datetime, max_days: int = MAX_RANGE_DAYS) -> tuple[str, str] | None:
    """(field, message) for a range a request may not ask for, else None."""
    for name, moment in (("start", start), ("end", end)):
        problem = year_problem(moment)
        if problem:
            return name, problem
    if start >= end:
        return "start", START_NOT_BEFORE_END
    if end - start > timedelta(days=max_days):
        return "end", RANGE_TOO_LONG.format(days=max_days)
    return None
