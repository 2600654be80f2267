import pytest

from governance.api.throttling import TokenRateThrottle
from tests.api.conftest import bearer

pytestmark = pytest.mark.django_db


def test_a_jobs_usage_per_hour_comes_from_the_rollups(client, world):
    client.force_login(world.cast.alice)

    response = client.get(f"/api/v1/jobs/{world.job_alice.pk}/usage/", {"resolution": "hour"})

    body = response.json()
    assert body["resolution"] == "hour"
    assert [(p["start"], p["gpu_hours"], p["samples"]) for p in body["points"]] == [("2026-11-03T10:00:00Z", 1, 6)]
    assert body["points"][0]["sm_mean"] == pytest.approx(87.5)
    assert body["points"][0]["idle_share"] == 0


def test_an_unknown_resolution_is_refused_naming_the_field(client, world):
    client.force_login(world.cast.admin)

    response = client.get(f"/api/v1/jobs/{world.job_alice.pk}/usage/", {"resolution": "minute"})

    assert response.status_code == 400 and "resolution" in response.json()["error"]["details"]


def test_cluster_utilisation_per_day_counts_every_gpu(client, world):
    client.force_login(world.cast.vision_lead)

    response = client.get(
        f"/api/v1/clusters/{world.cluster.pk}/utilisation/",
        {"resolution": "day", "start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"},
    )

    points = response.json()["points"]
    assert [(p["start"], p["gpus"], p["gpu_hours"]) for p in points] == [("2026-11-03T00:00:00Z", 4, 4)]
    assert points[0]["allocated_share"] == 1.0


def test_jobs_filter_by_start_time_with_any_utc_offset(client, world):
    client.force_login(world.cast.admin)

    late = client.get("/api/v1/jobs/", {"started_after": "2026-11-03T08:00:00-23:00"}).json()
    early = client.get("/api/v1/jobs/", {"started_after": "2026-11-03T08:00:00+23:00"}).json()

    assert (late["count"], early["count"]) == (0, 4)


def test_a_month_outside_the_supported_years_is_a_400_not_a_crash(client, world):
    client.force_login(world.cast.finance)

    response = client.get("/api/v1/chargeback/", {"month": "0000-01"})

    assert response.status_code == 400 and "month" in response.json()["error"]["details"]


def test_each_token_has_its_own_rate_limit(client, world, monkeypatch, one_window):
    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"user": "2/min", "ingest": "100/min"})
    from governance.api.services import api_token_create

    first = api_token_create(user=world.cast.finance, name="a", scope="read")[1]
    second = api_token_create(user=world.cast.finance, name="b", scope="read")[1]

    statuses = [client.get("/api/v1/teams/", **bearer(first)).status_code for _ in range(3)]
    other = client.get("/api/v1/teams/", **bearer(second))

    assert statuses == [200, 200, 429]
    assert other.status_code == 200
