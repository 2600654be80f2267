"""Calendar months in UTC: parsing 'YYYY-MM' and the half-open interval a month covers."""

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from governance.lib.ranges import FIRST_YEAR, LAST_YEAR

_MONTH = re.compile(r"^(?P<year>[0-9]{4})-(?P<month>0[1-9]|1[0-2])$")
NOT_A_MONTH = "month {text!r} is not of the form YYYY-MM (a year from {first} to {last})"


@dataclass(frozen=True, order=True)
class Month:
    year: int
    month: int

    @classmethod
    def parse(cls, text: str) -> "Month":
        match = _MONTH.match(text.strip())
        if not match or not FIRST_YEAR <= int(match["year"]) <= LAST_YEAR:
            raise ValueError(NOT_A_MONTH.format(text=text, first=FIRST_YEAR, last=LAST_YEAR))
        return cls(int(match["year"]), int(match["month"]))

    @classmethod
    def of(cls, moment: datetime) -> "Month":
        moment = moment.astimezone(UTC)
        return cls(moment.year, moment.month)

    @property
    def start(self) -> datetime:
        return datetime(self.year, self.month, 1, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        return self.next().start

    def next(self) -> "Month":
        return Month(self.year + self.month // 12, self.month % 12 + 1)

    def previous(self) -> "Month":
        return Month(self.year - (self.month == 1), (self.month - 2) % 12 + 1)

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"
