import csv
import io

import pytest
import time_machine

from tests.costs.conftest import declare
from tests.factories import ingest, job_record, rate

pytestmark = pytest.mark.django_db


def charts(response) -> dict:
    return {chart.id: chart for chart in response.context["charts"]}


def trace_names(chart) -> set[str]:
    return {trace["name"] for trace in chart.figure["data"]}


def test_the_overview_needs_a_login(client):
    response = client.get("/")

    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_overview_draws_every_chart_from_plotly_served_here(client, cast, usage):
    client.force_login(cast.admin)

    response = client.get("/", {"month": "2026-11"})

    assert response.status_code == 200
    assert set(charts(response)) == {"utilisation", "cost-per-team", "idle-cost", "queue-wait", "top-waste"}
    assert all(chart.has_data for chart in response.context["charts"])
    assert b"vendor/plotly/plotly-cartesian.min.js" in response.content and b"cdn" not in response.content.lower()


def test_cluster_utilisation_weighs_each_gpu_hour_by_its_mean_sm(client, cast, usage):
    client.force_login(cast.alice)

    utilisation = charts(client.get("/", {"month": "2026-11"}))["utilisation"].figure["data"][0]

    # 10:00: GPUs at 90, 0, 0, 0 -> 22.5%; after that 90, 0, 60, 0 -> 37.5%.
    assert utilisation["x"][0] == "2026-11-03 10:00"
    assert utilisation["y"] == [22.5, 37.5, 37.5, 37.5]


def test_the_cost_chart_stacks_the_teams_the_user_may_see(client, cast, usage):
    client.force_login(cast.admin)

    cost = charts(client.get("/", {"month": "2026-11"}))["cost-per-team"]

    nlp = next(trace for trace in cost.figure["data"] if trace["name"] == "NLP")
    assert nlp["x"][-1] == "2026-11" and nlp["y"][-1] == 16.0
    assert cost.figure["layout"]["barmode"] == "stack"


def test_idle_cost_is_the_share_of_each_teams_cost_spent_idle(client, cast, usage):
    client.force_login(cast.finance)

    response = client.get("/", {"month": "2026-11"})

    busy, idle = charts(response)["idle-cost"].figure["data"]
    assert busy["y"] == ["NLP", "Vision"] and idle["x"] == [8.0, 2.0]
    assert b"10.00 USD" in response.content  # idle cost of the month, with its currency


def test_queue_wait_is_measured_from_submit_to_start(client, cast, usage):
    client.force_login(cast.admin)

    boxes = charts(client.get("/", {"month": "2026-11"}))["queue-wait"].figure["data"]

    assert {box["name"]: box["median"] for box in boxes} == {"NLP": [45.0], "Vision": [180.0]}


def test_top_waste_ranks_jobs_by_idle_gpu_hours(client, cast, usage):
    client.force_login(cast.admin)

    response = client.get("/", {"month": "2026-11"})

    bar = charts(response)["top-waste"].figure["data"][0]
    assert bar["y"] == ["c1/3", "c1/2"] and bar["x"] == [1.0, 4.0]
    assert [w.idle_cost for w in response.context["waste"]] == [8, 2]


@pytest.mark.parametrize(
    ("who", "teams", "jobs"),
    [
        ("nlp_lead", {"NLP"}, ["c1/2"]),
        ("vision_lead", {"Vision"}, ["c1/3"]),
        ("alice", {"NLP"}, []),
    ],
)
def test_a_team_member_sees_no_other_teams_cost_or_jobs(client, cast, usage, who, teams, jobs):
    client.force_login(getattr(cast, who))

    response = client.get("/", {"month": "2026-11"})

    shown = charts(response)
    assert trace_names(shown["cost-per-team"]) == teams
    assert set(shown["idle-cost"].figure["data"][0]["y"]) == teams
    assert trace_names(shown["queue-wait"]) == teams
    assert shown["top-waste"].figure["data"][0]["y"] == jobs
    other = ({"NLP", "Vision"} - teams).pop()
    assert f'value="{other.lower()}"'.encode() not in response.content


def test_asking_for_another_teams_page_shows_only_your_own_and_says_so(client, cast, usage):
    client.force_login(cast.vision_lead)

    response = client.get("/", {"month": "2026-11", "team": "nlp"})

    assert trace_names(charts(response)["cost-per-team"]) == {"Vision"}
    assert b"team &#x27;nlp&#x27; is not one you may see" in response.content


def test_the_team_filter_narrows_every_team_chart(client, cast, usage):
    client.force_login(cast.admin)

    shown = charts(client.get("/", {"month": "2026-11", "team": "vision"}))

    assert trace_names(shown["cost-per-team"]) == {"Vision"}
    assert shown["top-waste"].figure["data"][0]["y"] == ["c1/3"]


def test_the_filters_stay_in_the_links_of_the_page(client, cast, usage):
    client.force_login(cast.admin)

    response = client.get("/", {"month": "2026-11", "team": "vision", "cluster": "c1"})

    assert b"chargeback.csv?month=2026-11&amp;cluster=c1&amp;team=vision" in response.content


def test_a_custom_range_outside_the_usage_empties_the_time_charts_and_says_what_to_do(client, cast, usage):
    client.force_login(cast.admin)

    response = client.get("/", {"month": "2026-11", "start": "2026-11-10", "end": "2026-11-12"})

    assert not charts(response)["utilisation"].has_data
    assert b'id="utilisation-empty"' in response.content and b"Pick another month" in response.content


def test_plotly_js_is_served_from_static_files(client):
    response = client.get("/static/vendor/plotly/plotly-cartesian.min.js")

    assert response.status_code == 200
    assert b"plotly.js (cartesian - minified) v4.1.1" in b"".join(response.streaming_content)[:2000]


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_the_csv_download_has_the_numbers_of_the_chart(client, cast):
    rate(price="2.00")
    declare(2)  # billing is bounded by the GPUs that exist: the rest of the month is the unallocated line
    ingest([job_record(gpus=2, end_time="2026-11-03T19:12:00Z", state="completed")])
    client.force_login(cast.finance)

    response = client.get("/chargeback.csv", {"month": "2026-11"})

    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    nlp = {"month": "2026-11", "team": "NLP", "gpu_hours": "20.0000", "cost": "40.00", "currency": "USD"}
    assert [r for r in rows if r["team"] == "NLP"] == [nlp]


def test_the_chargeback_csv_holds_only_the_teams_the_user_may_see(client, cast, usage):
    client.force_login(cast.vision_lead)

    response = client.get("/chargeback.csv", {"month": "2026-11"})

    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [row["team"] for row in rows] == ["Vision"]


def test_an_empty_database_says_how_to_get_data(client, cast):
    client.force_login(cast.admin)

    response = client.get("/")

    assert b"seed_demo" in response.content
    assert b"data-figure" not in response.content
