import csv
import io
import json

import pytest
import time_machine

from tests.factories import ingest, job_record, rate

pytestmark = pytest.mark.django_db


@pytest.fixture
def usage(cast):
    rate(price="2.00")
    ingest([job_record(gpus=2, end_time="2026-11-03T19:12:00Z", state="completed")])


def test_the_overview_needs_a_login(client):
    response = client.get("/")

    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_the_overview_shows_cost_per_team_as_a_plotly_chart(client, cast, usage):
    client.force_login(cast.admin)

    response = client.get("/", {"month": "2026-11"})

    assert response.status_code == 200
    figure = json.loads(response.context["figure"] and json.dumps(response.context["figure"]))
    nlp = next(trace for trace in figure["data"] if trace["name"] == "NLP")
    assert nlp["x"][-1] == "2026-11" and nlp["y"][-1] == 40.0
    assert b"vendor/plotly.min.js" in response.content
    assert b"cdn" not in response.content.lower()


def test_plotly_js_is_served_from_static_files(client):
    response = client.get("/static/vendor/plotly.min.js")

    assert response.status_code == 200
    assert b"plotly" in b"".join(response.streaming_content)[:2000].lower()


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_the_csv_download_has_the_numbers_of_the_chart(client, cast, usage):
    client.force_login(cast.finance)

    response = client.get("/chargeback.csv", {"month": "2026-11"})

    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows == [{"month": "2026-11", "team": "NLP", "gpu_hours": "20.0000", "cost": "40.00", "currency": "USD"}]


def test_an_empty_database_says_how_to_get_data(client, cast):
    client.force_login(cast.admin)

    response = client.get("/")

    assert b"seed_demo" in response.content
