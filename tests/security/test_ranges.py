"""Replays of issue 15 (bounds): no query string makes a page or an API call do unbounded work or fail."""

import time

import pytest

from governance.efficiency.models import Finding

pytestmark = pytest.mark.django_db
V1 = "/api/v1"


def notices(response) -> list[str]:
    return response.context["f"].errors


def test_the_cluster_page_clamps_a_range_of_eight_thousand_years_and_says_so(client, world):
    client.force_login(world.cast.alice)

    began = time.monotonic()
    response = client.get("/cluster/?start=0001-01-01&end=9999-12-30")

    assert response.status_code == 200 and time.monotonic() - began < 10
    assert any("outside the years" in n for n in notices(response))


def test_a_range_longer_than_400_days_is_clamped_with_a_message(client, world):
    client.force_login(world.cast.alice)

    response = client.get("/cluster/?start=2020-01-01&end=2026-12-31")

    f = response.context["f"]
    assert response.status_code == 200
    assert (f.end - f.start).days == 400
    assert any("at most 400 days" in n for n in notices(response))
    assert "at most 400 days" in response.content.decode()


@pytest.mark.parametrize("url", ["/?start=0001-01-01&end=9999-12-30", "/?month=2199-12&start=2199-12-31",
                                 "/?start=9999-12-31", "/?end=0001-01-01", "/?month=1900-01"])  # fmt: skip
def test_the_overview_answers_any_range_without_failing(client, world, url):
    client.force_login(world.cast.nlp_lead)

    assert client.get(url).status_code == 200


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("start=0001-01-01T00:00:00Z&end=9999-12-30T00:00:00Z", "start"),
        ("start=2020-01-01T00:00:00Z&end=2026-01-01T00:00:00Z", "end"),
        ("start=2026-11-02T00:00:00Z&end=2026-11-01T00:00:00Z", "start"),
        ("end=9999-12-31T23:59:59-01:00", "end"),
    ],
)
def test_the_utilisation_api_refuses_an_unbounded_range_naming_the_field(client, world, query, field):
    client.force_login(world.cast.alice)

    response = client.get(f"{V1}/clusters/{world.cluster.pk}/utilisation/?{query}")

    assert response.status_code == 400
    assert field in response.json()["error"]["details"]


def test_a_findings_filter_with_a_unicode_digit_is_an_empty_list_not_a_500(client, world):
    client.force_login(world.cast.admin)

    response = client.get(f"{V1}/findings/?job=²")

    assert response.status_code == 200 and response.json()["results"] == []


def test_a_findings_filter_with_an_unknown_rule_or_state_is_a_400_naming_it(client, world):
    client.force_login(world.cast.admin)

    rule = client.get(f"{V1}/findings/?rule=nope")
    state = client.get(f"{V1}/findings/?state=nope")

    assert rule.status_code == 400 and "rule" in rule.json()["error"]["details"]
    assert state.status_code == 400 and "state" in state.json()["error"]["details"]


def test_the_findings_list_is_paginated_and_keeps_its_filters(client, world, settings):
    settings.API_PAGE_SIZE = 2
    client.force_login(world.cast.admin)

    first = client.get(f"{V1}/findings/").json()
    by_job = client.get(f"{V1}/findings/", {"job_pk": str(world.job_bob.pk), "page_size": 100}).json()

    assert first["count"] == Finding.objects.count() > 2 and len(first["results"]) == 2 and first["next"]
    assert by_job["results"] and {r["job_pk"] for r in by_job["results"]} == {world.job_bob.pk}


def test_a_huge_job_id_in_the_findings_filter_is_an_empty_list(client, world):
    client.force_login(world.cast.admin)

    response = client.get(f"{V1}/findings/?job=99999999999999999999999")

    assert response.status_code == 200 and response.json()["results"] == []


# The chargeback is a statement (one month's totals), not a list; so are a month's forecast and footprint, and an
# engineer's month (me/month/).
NOT_LISTS = {
    "/api/v1/",
    "/api/v1/chargeback/",
    "/api/v1/forecast/",
    "/api/v1/footprint/",
    "/api/v1/me/month/",
    "/api/v1/audit/csv/",
}  # the audit CSV is an export, not a list


def test_every_api_list_is_paginated(client, world):
    from django.urls import reverse

    client.force_login(world.cast.admin)
    schema = client.get(reverse("schema"), {"format": "json"}).json()
    lists = [path for path, ops in schema["paths"].items() if "get" in ops and "{" not in path
             and path not in NOT_LISTS]  # fmt: skip
    unpaginated = []

    for path in lists:
        body = client.get(path).json()
        if not (isinstance(body, dict) and {"count", "next", "results"} <= set(body)):
            unpaginated.append(path)

    assert len(lists) >= 10 and {"/api/v1/findings/", "/api/v1/rates/", "/api/v1/budgets/"} <= set(lists)
    assert unpaginated == []
