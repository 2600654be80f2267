"""The vendored plotly.js partial bundle: the pinned file, its licence, and every trace type a page draws in it."""

import hashlib
import re
from pathlib import Path

from django.conf import settings

from governance.dashboard.boxes import box_of
from governance.dashboard.figures.cluster import ClusterHour, cluster_utilisation
from governance.dashboard.figures.costs import budget_bar, cost_by, cost_per_team_per_month, cost_trend
from governance.dashboard.figures.forecast import forecast_figure
from governance.dashboard.figures.heatmap import gpu_heatmap
from governance.dashboard.figures.jobs import idle_strip, job_timeline
from governance.dashboard.figures.overview import (
    idle_cost_share,
    queue_wait_per_team,
    top_jobs_by_waste,
    utilisation_over_time,
)

VENDOR = Path(settings.BASE_DIR) / "static" / "vendor" / "plotly"
BUNDLE = VENDOR / "plotly-cartesian.min.js"


def test_the_bundle_is_the_pinned_file_with_its_licence():
    pinned = (VENDOR / "PINNED").read_text()
    digest = hashlib.sha256(BUNDLE.read_bytes()).hexdigest()

    assert f"sha256 plotly-cartesian.min.js: {digest}" in pinned
    assert "v4.1.1" in BUNDLE.read_text()[:200] and "plotly.js-cartesian-dist-min 4.1.1" in pinned
    assert (VENDOR / "LICENSE").read_text().startswith("MIT License")


def _figures() -> list[dict]:
    from datetime import UTC, date, datetime
    from decimal import Decimal

    hour = datetime(2026, 11, 3, 10, tzinfo=UTC)
    return [
        cluster_utilisation([ClusterHour(hour, 2, 1.0, 0.5)], 40.0),
        budget_bar(Decimal(10), Decimal(20), "USD", "green", Decimal(18)),
        cost_by("project", {"a": Decimal(1)}, "USD"),
        cost_per_team_per_month([], "USD"),
        cost_trend([("2026-11", Decimal(1), Decimal(0))], "USD"),
        forecast_figure(
            title="t", actual=[(date(2026, 11, 1), Decimal(1))], path=[(date(2026, 11, 2), 2, 1, 3)], currency="USD"
        ),
        gpu_heatmap(["n:0"], ["2026-11-03 10:00"], [[50.0]]),
        idle_strip([], 1.0),
        job_timeline([]),
        idle_cost_share([], "USD"),
        queue_wait_per_team({"NLP": box_of([1.0, 2.0])}),
        top_jobs_by_waste([], "USD"),
        utilisation_over_time(["2026-11-03 10:00"], [50.0]),
    ]


def test_every_trace_type_the_pages_draw_is_in_the_bundle():
    drawn = {trace.get("type", "scatter") for figure in _figures() for trace in figure["data"]}
    # The bundle registers each trace module under its name (moduleType "trace", name "<type>").
    registered = set(re.findall(r'moduleType:"trace",name:"(\w+)"', BUNDLE.read_text()))

    assert drawn == {"scatter", "bar", "box", "heatmap"}
    assert drawn <= registered, drawn - registered
