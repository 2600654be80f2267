"""Tables a page shows and offers as CSV: one list of formatted cells feeds both, so the download holds exactly
the rows on screen, written by the same formatter (governance/lib/format.py)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from django.urls import reverse

from governance.costs.breakdowns import Group, JobCost
from governance.dashboard.advice import Advice
from governance.lib import format as fmt
from governance.lib.text import csv_safe

NO_ADVICE = "no open finding"


@dataclass(frozen=True)
class Cell:
    text: str
    href: str = ""
    number: bool = False


@dataclass
class Table:
    id: str
    title: str
    headers: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    csv_url: str = ""
    empty: str = "Nothing in this month."


def groups_table(id: str, title: str, key: str, groups: list[Group], csv_url: str = "") -> Table:
    table = Table(id, title, [key, "GPU-hours", "Cost", "Idle cost", "Idle %"], csv_url=csv_url)
    for g in groups:
        table.rows.append([
            Cell(g.key), Cell(fmt.hours(g.gpu_hours), number=True), Cell(fmt.money(g.cost, g.currency), number=True),
            Cell(fmt.money(g.idle_cost, g.currency), number=True), Cell(fmt.pct(g.idle_share), number=True),
        ])  # fmt: skip
    return table


def jobs_table(id: str, title: str, jobs: list[JobCost], advice: dict[int, Advice], csv_url: str = "",
               team: bool = True) -> Table:  # fmt: skip
    headers = ["Job", *(["Team"] if team else []), "User", "Project", "GPU-hours", "Cost", "Idle cost", "Idle %",
               "The change that would save most", "Saving, last 30 days"]  # fmt: skip
    table = Table(id, title, headers, csv_url=csv_url, empty="No job was charged in this month.")
    for j in jobs:
        a = advice.get(j.job_pk)
        href = reverse("efficiency:job", args=[j.job_pk])
        table.rows.append([
            Cell(f"{j.cluster}/{j.job_ref}", href), *([Cell(j.team)] if team else []), Cell(j.user), Cell(j.project),
            Cell(fmt.hours(j.gpu_hours), number=True), Cell(fmt.money(j.cost, j.currency), number=True),
            Cell(fmt.money(j.idle_cost, j.currency), number=True), Cell(fmt.pct(j.idle_share), number=True),
            Cell(f"{a.title}: {a.advice}" if a else NO_ADVICE, f"{href}#finding-{a.finding_pk}" if a else ""),
            Cell(fmt.money(a.saving, a.currency) if a else fmt.UNKNOWN, number=True),
        ])  # fmt: skip
    return table


def table_csv(table: Table) -> Iterator[str]:
    """The table's rows as CSV, cells as on screen (text a spreadsheet would run as a formula is quoted)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def flush() -> str:
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    writer.writerow(table.headers)
    yield flush()
    for row in table.rows:
        writer.writerow([csv_safe(c.text) for c in row])
        yield flush()


def rows_text(rows: Iterable[list[Cell]]) -> list[list[str]]:
    return [[c.text for c in row] for row in rows]
