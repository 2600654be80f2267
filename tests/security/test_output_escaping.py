"""Replays of issue 15 (output): names a user chose reach CSV cells and chart labels as inert text."""

import csv
import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from governance.dashboard.boxes import box_of
from governance.dashboard.figures.costs import CostPoint, cost_by, cost_per_team_per_month
from governance.dashboard.figures.heatmap import gpu_heatmap
from governance.dashboard.figures.jobs import idle_strip, job_timeline
from governance.dashboard.figures.overview import (
    IdleRow,
    WasteRow,
    idle_cost_share,
    queue_wait_per_team,
    top_jobs_by_waste,
)
from governance.lib.text import csv_safe, plain
from governance.org.models import Project, Team
from tests.factories import at, ingest, job_record, rate, series

FORMULA = '=HYPERLINK("http://x")'
LINK = '<a href="http://x">x</a>'


@pytest.mark.parametrize("text", ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx", FORMULA])
def test_a_cell_a_spreadsheet_would_run_gets_a_leading_apostrophe(text):
    assert csv_safe(text) == "'" + text


@pytest.mark.parametrize("value", ["NLP", "a=b", "", 3, -2.5, None])
def test_other_cells_are_left_alone(value):
    assert csv_safe(value) == value


def test_a_label_shows_the_characters_typed_and_no_markup():
    assert plain(LINK) == '&lt;a href="http://x"&gt;x&lt;/a&gt;'
    assert plain("R&D") == "R&amp;D"


def figures_with(name: str) -> list[dict]:
    from datetime import UTC, datetime
    from decimal import Decimal

    from governance.dashboard.figures.jobs import GpuHourPoint

    hour = datetime(2026, 11, 3, tzinfo=UTC)
    return [
        cost_per_team_per_month([CostPoint("2026-11", name, Decimal(3))], "USD"),
        cost_by("project", {name: Decimal(3)}, "USD"),
        idle_cost_share([IdleRow(name, Decimal(3), 0.5)], "USD"),
        queue_wait_per_team({name: box_of([1.0, 2.0])}),
        top_jobs_by_waste([WasteRow(name, name, name, 1.0, Decimal(2))], "USD"),
        gpu_heatmap([name], ["2026-11-03 00:00"], [[1.0]]),
        job_timeline([GpuHourPoint(name, hour, 1.0, 2.0, 3.0)]),
        idle_strip([GpuHourPoint(name, hour, 0.0, 2.0, 3.0)], 1.0),
    ]


@pytest.mark.parametrize("index", range(8))
def test_no_figure_carries_a_name_as_markup(index):
    figure = json.dumps(figures_with(LINK)[index])

    assert "<a" not in figure and "</a>" not in figure
    assert "&lt;a href" in figure


@pytest.fixture
def hostile(cast):
    """A team, project, user and job whose names are a formula and a link, with an hour of idle usage."""
    team = Team.objects.create(slug="evil", name=FORMULA)
    Project.objects.create(team=team, slug="evil-proj", name=LINK)
    Team.objects.create(slug="evil-2", name=LINK)
    rate(price="2.00")
    ingest([
        job_record(job_id=LINK, user=FORMULA, project="evil-proj", gpus=1, submit_time="2026-11-03T09:00:00Z",
                   start_time="2026-11-03T10:00:00Z", end_time="2026-11-03T12:00:00Z", state="completed"),
        *series(start=at("2026-11-03T10:00:00Z"), minutes=120, every_s=600, job_id=LINK, node=LINK, sm_util=0.0),
    ])  # fmt: skip
    return team


@pytest.mark.django_db
def test_the_overview_charts_show_hostile_names_as_text(client, cast, hostile):
    client.force_login(cast.admin)

    response = client.get("/?month=2026-11")

    figures = json.dumps([chart.figure for chart in response.context["charts"]])
    assert response.status_code == 200
    assert "&lt;a href" in figures and "<a" not in figures
    assert '<a href="http://x"' not in response.content.decode()


@pytest.mark.django_db
def test_the_heatmap_shows_a_hostile_node_name_as_text(client, cast, hostile):
    client.force_login(cast.admin)

    response = client.get("/cluster/?start=2026-11-03&end=2026-11-03")

    figures = json.dumps([chart.figure for chart in response.context["charts"]])
    assert "&lt;a href" in figures and "<a" not in figures


@pytest.mark.django_db
def test_the_chargeback_csv_starts_a_formula_team_name_with_an_apostrophe(client, cast, hostile):
    client.force_login(cast.admin)

    response = client.get("/chargeback.csv?month=2026-11")

    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    teams = [row[1] for row in rows[1:]]
    assert "'" + FORMULA in teams
    assert not [t for t in teams if t.startswith(("=", "+", "-", "@"))]


CHARTS_JS = Path(settings.BASE_DIR) / "static" / "js" / "charts.js"
NODE_RUN = """
global.document = { querySelectorAll: () => [] };
global.window = {};
require(process.argv[1]);
const figure = JSON.parse(process.argv[2]);
process.stdout.write(window.gpuGovernance.figureCsv(figure.data));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_charts_csv_download_neutralises_formulas_and_shows_names_as_typed():
    figure = top_jobs_by_waste([WasteRow(FORMULA, LINK, "-2+3", 1.0, __import__("decimal").Decimal(-2))], "USD")

    out = subprocess.run(
        ["node", "-e", NODE_RUN, str(CHARTS_JS), json.dumps(figure)], capture_output=True, text=True, check=True
    ).stdout

    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows[0]["y"] == "'" + FORMULA
    assert rows[0]["customdata"] == f"{LINK} | -2+3 | -2"
    assert rows[0]["x"] == "1"
