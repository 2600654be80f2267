"""An ingest token found valid authenticates a process's next requests without a query for API_TOKEN_CACHE_S
seconds (governance/api/token_cache.py); a revocation still takes effect within that time everywhere, and at once
in the process that revoked it."""

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from governance.api.models import ApiToken
from governance.org.models import User
from tests.api.conftest import bearer

TEAMS = "/api/v1/teams/"
INGEST = "/api/v1/ingest/"

pytestmark = pytest.mark.django_db


def _token_queries(client, token: str) -> int:
    """The queries of the api_token table one ingest request (an empty batch: 400) made."""
    with CaptureQueriesContext(connection) as queries:
        client.post(INGEST, b"{}", content_type="application/json", **bearer(token))
    return sum('FROM "api_apitoken"' in q["sql"] for q in queries.captured_queries)


def test_an_ingest_tokens_second_request_within_the_ttl_is_authenticated_without_a_query(client, ingest_token):
    assert _token_queries(client, ingest_token) == 1
    assert _token_queries(client, ingest_token) == 0


def test_a_read_token_is_looked_up_on_every_request(client, read_token):
    client.get(TEAMS, **bearer(read_token))

    with CaptureQueriesContext(connection) as queries:
        assert client.get(TEAMS, **bearer(read_token)).status_code == 200

    assert any('FROM "api_apitoken"' in q["sql"] for q in queries.captured_queries)


def test_an_ingest_token_revoked_by_another_process_is_refused_once_the_ttl_passed(client, ingest_token, settings):
    settings.API_TOKEN_CACHE_S = 1
    assert _token_queries(client, ingest_token) == 1

    ApiToken.objects.update(revoked_at=timezone.now())  # another process: this one's memory is not told
    within = client.post(INGEST, b"{}", content_type="application/json", **bearer(ingest_token))
    time.sleep(1.05)
    after = client.post(INGEST, b"{}", content_type="application/json", **bearer(ingest_token))

    assert within.status_code == 400  # still authenticated: the empty batch itself is refused
    assert after.status_code == 401


def test_an_ingest_token_revoked_in_this_process_is_refused_at_once(client, ingest_token):
    _token_queries(client, ingest_token)

    ApiToken.objects.get().revoke()
    response = client.post(INGEST, b"{}", content_type="application/json", **bearer(ingest_token))

    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Invalid, expired or revoked API token."


def test_an_ingest_token_of_a_deactivated_user_is_refused_once_the_ttl_passed(client, cast, ingest_token, settings):
    settings.API_TOKEN_CACHE_S = 1
    _token_queries(client, ingest_token)

    User.objects.filter(pk=cast.admin.pk).update(is_active=False)
    time.sleep(1.05)
    response = client.post(INGEST, b"{}", content_type="application/json", **bearer(ingest_token))

    assert response.status_code == 401


def test_an_expired_ingest_token_is_refused_even_while_remembered(client, ingest_token, settings):
    _token_queries(client, ingest_token)
    remembered = ApiToken.objects.get()

    from governance.api.token_cache import token_remembered

    kept = token_remembered(remembered.key_hash, ttl_s=settings.API_TOKEN_CACHE_S)
    kept.expires_at = timezone.now()
    response = client.post(INGEST, b"{}", content_type="application/json", **bearer(ingest_token))

    assert response.status_code == 401


def test_with_a_ttl_of_zero_every_request_looks_the_token_up(client, ingest_token, settings):
    settings.API_TOKEN_CACHE_S = 0

    assert [_token_queries(client, ingest_token) for _ in range(2)] == [1, 1]
