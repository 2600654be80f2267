"""Tables a page shows and offers as CSV: one list of cells feeds both, so the download holds exactly the rows on
screen. A page shows a cell's text (governance/lib/format.py); the CSV holds its number as data (a plain decimal,
the currency in a column of its own). Money columns are printed with money.printed, so they add up as shown."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal

from django.urls import reverse

from governance.costs.breakdowns import Group, JobCost
from governance.dashboard.advice import Advice
from governance.lib import format as fmt
from governance.lib.money import printed, to_cents
from governance.lib.text import csv_safe

NO_ADVICE = "no open finding"


@dataclass(frozen=True)
class Cell:
    text: str
    href: str = ""
    number: bool = False
    data: Decimal | None = None  # a number cell's value in the CSV (None: unknown, an empty cell)


def money_cell(amount: Decimal | None, currency: str) -> Cell:
    return Cell(fmt.money(amount, currency), number=True, data=None if amount is None else to_cents(amount))


def hours_cell(value: Decimal) -> Cell:
    return Cell(fmt.hours(value), number=True, data=value.quantize(fmt.HOURS_UNIT))


def pct_cell(share: Decimal | None) -> Cell:
    if share is None:
        return Cell(fmt.UNKNOWN, number=True)
    percent = (share * 100).quantize(fmt.HOURS_UNIT)
    return Cell(f"{percent:,.1f}%", number=True, data=percent)


@dataclass
class Table:
    id: str
    title: str
    headers: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    csv_url: str = ""
    empty: str = "Nothing in this month."
    currency: str = ""  # the currency of its money cells: a column of its own in the CSV
    key_headers: tuple[str, ...] = ("Cost",)  # with the first column, what a phone shows (the rest: .extra)

    @property
    def extra_columns(self) -> list[int]:
        """The columns a narrow screen hides: all but the first and the key headers."""
        return [i for i, h in enumerate(self.headers) if i and h not in self.key_headers]


def groups_table(id: str, title: str, key: str, groups: list[Group], csv_url: str = "",
                 printed_as: tuple[Decimal, Decimal] | None = None) -> Table:  # fmt: skip
    """Groups of one total (a team's month): their cost and idle cost printed to add up to `printed_as` (the
    team's printed cost and idle cost), else to their exact sums rounded."""
    currency = groups[0].currency if groups else ""
    table = Table(id, title, [key, "GPU-hours", "Cost", "Idle cost", "Idle %"], csv_url=csv_url, currency=currency)
    cost_total, idle_total = printed_as or (None, None)
    costs = printed([g.cost for g in groups], cost_total)
    idle = printed([g.idle_cost for g in groups], idle_total)
    hours = printed([g.gpu_hours for g in groups], unit=fmt.HOURS_UNIT)
    for g, c, i, h in zip(groups, costs, idle, hours, strict=True):
        table.rows.append([Cell(g.key), hours_cell(h), money_cell(c, currency), money_cell(i, currency),
                           pct_cell(g.idle_share)])  # fmt: skip
    return table


def jobs_table(id: str, title: str, jobs: list[JobCost], advice: dict[int, Advice], csv_url: str = "",
               team: bool = True, adds_up: bool = False) -> Table:  # fmt: skip
    """Jobs, each rounded once as on its own page; `adds_up`: the list is every job under a total the page prints
    (/me/), so its cost and idle cost are placed to add up to it."""
    headers = ["Job", *(["Team"] if team else []), "User", "Project", "GPU-hours", "Cost", "Idle cost", "Idle %",
               "The change that would save most", "Saving, last 30 days"]  # fmt: skip
    currency = jobs[0].currency if jobs else ""
    table = Table(id, title, headers, csv_url=csv_url, empty="No job was charged in this month.", currency=currency)
    costs = printed([j.cost for j in jobs]) if adds_up else [to_cents(j.cost) for j in jobs]
    idle = printed([j.idle_cost for j in jobs]) if adds_up else [to_cents(j.idle_cost) for j in jobs]
    for j, cost, idle_cost in zip(jobs, costs, idle, strict=True):
        a = advice.get(j.job_pk)
        href = reverse("efficiency:job", args=[j.job_pk])
        table.rows.append([
            Cell(f"{j.cluster}/{j.job_ref}", href), *([Cell(j.team)] if team else []), Cell(j.user), Cell(j.project),
            hours_cell(j.gpu_hours), money_cell(cost, j.currency), money_cell(idle_cost, j.currency),
            pct_cell(j.idle_share),
            Cell(f"{a.title}: {a.advice}" if a else NO_ADVICE, f"{href}#finding-{a.finding_pk}" if a else ""),
            money_cell(a.saving if a else None, a.currency if a else j.currency),
        ])  # fmt: skip
    return table


def table_csv(table: Table) -> Iterator[str]:
    """The table's rows as data: text as on screen (text a spreadsheet would run as a formula is quoted), numbers
    as plain decimals (unknown: empty), and the currency in a column of its own."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def flush() -> str:
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    currency = [table.currency] if table.currency else []
    writer.writerow([*table.headers, *(["Currency"] if currency else [])])
    yield flush()
    for row in table.rows:
        writer.writerow([*(c.data if c.number else csv_safe(c.text) for c in row), *currency])
        yield flush()


def rows_text(rows: Iterable[list[Cell]]) -> list[list[str]]:
    return [[c.text for c in row] for row in rows]
