"""Rate limits count requests per token in fixed windows: one counter in the shared cache, whatever the rate."""

import pytest
from django.core.cache import cache

from governance.api.models import ApiToken
from governance.api.throttling import TokenScopedRateThrottle
from tests.api.conftest import bearer

INGEST = "/api/v1/ingest/"

pytestmark = pytest.mark.django_db


def test_the_ingest_rate_refuses_the_request_past_it_with_retry_after(client, ingest_token, monkeypatch, one_window):
    monkeypatch.setattr(TokenScopedRateThrottle, "THROTTLE_RATES", {"user": "1200/min", "ingest": "3/min"})

    statuses = [client.post(INGEST, b"{}", content_type="application/json", **bearer(ingest_token)) for _ in range(4)]

    assert [r.status_code for r in statuses] == [400, 400, 400, 429]
    assert 0 < int(statuses[-1]["Retry-After"]) <= 60


def test_the_counter_is_one_number_however_many_requests_came(client, ingest_token, monkeypatch):
    monkeypatch.setattr(TokenScopedRateThrottle, "timer", lambda self: 1_800_000_030.0)
    for _ in range(5):
        client.post(INGEST, b"{}", content_type="application/json", **bearer(ingest_token))

    key = f"throttle_ingest_token-{ApiToken.objects.get().pk}:{1_800_000_030 // 60}"

    assert cache.get(key) == 5


def test_a_new_window_starts_a_new_count(client, ingest_token, monkeypatch):
    monkeypatch.setattr(TokenScopedRateThrottle, "THROTTLE_RATES", {"user": "1200/min", "ingest": "2/min"})
    now = [1_800_000_030.0]
    monkeypatch.setattr(TokenScopedRateThrottle, "timer", lambda self: now[0])

    first = [client.post(INGEST, b"{}", content_type="application/json", **bearer(ingest_token)) for _ in range(3)]
    now[0] += 60
    later = client.post(INGEST, b"{}", content_type="application/json", **bearer(ingest_token))

    assert [r.status_code for r in first] == [400, 400, 429] and first[-1]["Retry-After"] == "30"
    assert later.status_code == 400
