"""Replays of issue 25 item 12: a month outside 1970-2199 is a 400 naming it wherever a month is taken, and the
unattributed worklist renders in the browsable API."""

import pytest

pytestmark = pytest.mark.django_db
V1 = "/api/v1"


@pytest.mark.parametrize("month", ["1969-12", "1900-01", "2200-01", "0001-01"])
def test_it_refuses_to_close_a_month_outside_the_years_of_usage_naming_the_month(client, cast, month):
    client.force_login(cast.finance)

    response = client.post(f"{V1}/months/{month}/close/")

    assert response.status_code == 400
    assert month in response.json()["error"]["message"]
    assert "month" in response.json()["error"]["details"]


@pytest.mark.parametrize(
    "url",
    [
        "/chargeback/?month=1969-12",
        "/forecast/?month=1969-12",
        "/footprint/?month=1969-12",
        "/unattributed/?month=1969-12",
        "/me/month/?month=1969-12",
    ],
)
def test_it_answers_400_naming_the_month_on_every_endpoint_taking_one(client, cast, url):
    client.force_login(cast.admin)

    response = client.get(V1 + url)

    assert response.status_code == 400
    assert "1969-12" in str(response.json()["error"]["details"]["month"])


def test_it_refuses_a_budget_for_year_one_as_a_400_not_a_500(client, cast):
    client.force_login(cast.admin)

    response = client.post(
        f"{V1}/budgets/", {"team": "nlp", "month": "0001-01", "amount": "100.00"}, content_type="application/json"
    )

    assert response.status_code == 400
    assert "0001-01" in str(response.json()["error"]["details"]["month"])


def test_the_close_page_answers_400_naming_a_month_before_1970(client, cast):
    client.force_login(cast.finance)

    response = client.post("/costs/close/1969-12/")

    assert response.status_code == 400
    assert "1969-12" in response.content.decode()


@pytest.mark.parametrize(("query", "how"), [("&format=api", {}), ("", {"HTTP_ACCEPT": "text/html"})])
def test_the_unattributed_worklist_renders_in_the_browsable_api(client, world, query, how):
    client.force_login(world.cast.finance)

    response = client.get(f"{V1}/unattributed/?month=2026-11{query}", **how)

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert "nobody-knows" in response.content.decode()
