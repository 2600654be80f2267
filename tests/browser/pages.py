"""The pages the browser tests open: append a Page for each new page (url, roles that open it, chart ids)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
ALL_ROLES = ("admin", "finance", "nlp_lead", "alice", "vision_lead")
OVERVIEW_CHARTS = ("utilisation", "cost-per-team", "idle-cost", "queue-wait", "top-waste")


@dataclass(frozen=True)
class Page:
    name: str
    url: str
    roles: tuple[str, ...]
    charts: tuple[str, ...]


PAGES: list[Page] = [
    Page("overview", "/?month=2026-11", ("admin", "finance", "nlp_lead", "vision_lead"), OVERVIEW_CHARTS),
    # alice's own jobs never held an idle GPU: her page says so instead of drawing an empty chart.
    Page("overview", "/?month=2026-11", ("alice",), OVERVIEW_CHARTS[:-1]),
    Page("heatmap", "/cluster/?start=2026-11-03&end=2026-11-03", ALL_ROLES, ("heatmap",)),
]


def cases() -> list[tuple[Page, str]]:
    return [(page, role) for page in PAGES for role in page.roles]
