"""Untrusted names (teams, projects, jobs, users, nodes) on their way into CSV cells and chart labels."""

from __future__ import annotations

from typing import Any

# A spreadsheet runs a cell that starts with one of these as a formula (=HYPERLINK(...), +cmd|...).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(value: Any) -> Any:
    """The value for a CSV cell: text a spreadsheet would run as a formula gets a leading apostrophe.

    Numbers are left alone (a negative amount stays a number); only strings are neutralised.
    """
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def plain(text: str) -> str:
    """Text for a Plotly label: `<`, `>` and `&` as entities, so that Plotly's subset of HTML (links, bold, line
    breaks) in a name is shown as the characters typed, never rendered. Plotly decodes the entities for display."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
