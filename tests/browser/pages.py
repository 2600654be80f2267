"""The pages the browser tests open: append a Page for each new page (url, roles that open it, chart ids).
A url may name a job of the browser world as {nlp_job}, {alice_job} or {vision_job}; `shows` are selectors
the page must display for that role (a page without charts still proves it shows its data)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
ALL_ROLES = ("admin", "finance", "nlp_lead", "alice", "vision_lead")
OVERVIEW_CHARTS = ("forecast", "utilisation", "cost-per-team", "idle-cost", "queue-wait", "top-waste")
TEAM_CHARTS = ("cost-by-project", "cost-by-model", "cost-trend")
# The month-end forecast shows to everyone who sees the team's totals.
FORECAST = ("forecast",)
JOB_CHARTS = ("job-idle-strip", "job-timeline")  # the idle hours as a strip, then SM, memory and power
LEADS_AND_UP = ("admin", "finance", "nlp_lead")


@dataclass(frozen=True)
class Page:
    name: str
    url: str
    roles: tuple[str, ...]
    charts: tuple[str, ...]
    shows: tuple[str, ...] = ()


PAGES: list[Page] = [
    Page("overview", "/?month=2026-11", ("admin", "finance", "nlp_lead", "vision_lead"), OVERVIEW_CHARTS),
    # alice's own jobs never held an idle GPU: her page says so instead of drawing an empty chart.
    Page("overview", "/?month=2026-11", ("alice",), OVERVIEW_CHARTS[:-1]),
    Page("heatmap", "/cluster/?start=2026-11-03&end=2026-11-03", ALL_ROLES, ("heatmap",), ("a[href='/clusters/c1/']",)),
    # Chargeback: finance's month (October has ended, so it can be closed), then a team's month.
    Page("costs-finance", "/costs/?month=2026-10", ("admin", "finance"), (), ("#teams tbody tr", "#close-month")),
    Page(
        "costs-team-nlp",
        "/costs/team/nlp/?month=2026-11",
        LEADS_AND_UP,
        ("budget-bar", *FORECAST, *TEAM_CHARTS),
        (
            "#lines tbody tr",
            "a[download]",
            "#top-cost tbody tr",
            "#users tbody tr",
            "#team-findings .job-group",
            "#month-previous",
        ),
    ),
    # An engineer sees the team's totals and budget, never its lines.
    Page("costs-team-nlp", "/costs/team/nlp/?month=2026-11", ("alice",), ("budget-bar", *FORECAST), ("#totals",)),
    Page(
        "costs-team-vision",
        "/costs/team/vision/?month=2026-11",
        ("vision_lead",),
        (*FORECAST, *TEAM_CHARTS),
        ("#lines tbody tr",),
    ),
    # Efficiency: a job's timelines and findings, the findings list, the cluster against its 40% line.
    Page(
        "job-nlp",
        "/jobs/{nlp_job}/",
        LEADS_AND_UP,
        JOB_CHARTS,
        (".finding button[value=acknowledged]", "#job-summary", ".finding-title"),
    ),
    Page("job-alice", "/jobs/{alice_job}/", ("admin", "nlp_lead", "alice"), JOB_CHARTS, (".finding .advice",)),
    Page("job-vision", "/jobs/{vision_job}/", ("admin", "vision_lead"), JOB_CHARTS, (".finding .advice",)),
    Page(
        "findings", "/findings/", ALL_ROLES, (), (".finding button[value=dismissed]", "#findings-count", ".job-group")
    ),
    # An engineer's month: their jobs with cost, idle cost and the change that would save most.
    Page("me", "/me/?month=2026-11", ("alice",), (), ("#my-jobs tbody tr", "#costliest-job")),
    Page("me-october", "/me/?month=2026-10", ("alice",), (), ("#my-jobs tbody tr", "#costliest-job")),
    Page("job-search", "/jobs/?q=no-such-job", ALL_ROLES, (), ("#no-jobs",)),
    Page("close-confirm", "/costs/close/2026-10/", ("admin", "finance"), (), ("#teams tbody tr", "#confirm-close")),
    Page("cluster-c1", "/clusters/c1/", ALL_ROLES, ("cluster-utilisation",), ("#top-jobs tbody tr",)),
]


def cases() -> list[tuple[Page, str]]:
    return [(page, role) for page in PAGES for role in page.roles]
