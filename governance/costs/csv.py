"""CSV rendering of chargeback rows, streamed row by row: each team's cost as its statement line prints it."""

import csv
from collections.abc import Iterable, Iterator

from governance.costs.selectors import TeamCharge

TEAM_MONTH_HEADER = ["month", "team", "gpu_hours", "cost", "currency"]


class _Echo:
    def write(self, value: str) -> str:
        return value


def team_month_csv(charges: Iterable[TeamCharge]) -> Iterator[str]:
    writer = csv.writer(_Echo(), lineterminator="\n")
    yield writer.writerow(TEAM_MONTH_HEADER)
    for c in charges:
        yield writer.writerow([str(c.month), c.team, f"{c.gpu_hours:.4f}", f"{c.printed_cost}", c.currency])
