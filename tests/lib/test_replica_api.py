"""API reads go to the real streaming replica too: a token is looked up on the primary, then its reads go to the
replica unless its user wrote something the replica has not replayed yet (the user's mark on the primary, since an
API client sends no cookies back). Rate counts are counted on the primary whatever the request reads.

The replica: tests/replica_server.py (the `replica_port` fixture, tests/lib/conftest.py).
"""

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.test.utils import CaptureQueriesContext

from governance.api.models import WriteMark
from governance.api.services import api_token_create
from governance.api.throttling import TokenRateThrottle
from governance.lib.replica import COOKIE, REPLICA, user_mark
from governance.org.models import Team
from tests.api.conftest import bearer
from tests.factories import batch_body, job_record, sample_record
from tests.replica_server import ROUTERS, replay_paused, replica_caught_up

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="a streaming replica is PostgreSQL's"),
    pytest.mark.django_db(transaction=True, databases=[DEFAULT_DB_ALIAS, REPLICA]),
]

TEAMS = "/api/v1/teams/"


def _team_slugs(client, raw: str) -> tuple[set[str], list[str], list[str]]:
    """The teams the token's user sees through the API, and the statements that ran on each end for them."""
    with CaptureQueriesContext(connections[REPLICA]) as on_replica, CaptureQueriesContext(connection) as on_primary:
        response = client.get(TEAMS, {"page_size": 100}, **bearer(raw))
    assert response.status_code == 200, response.content
    slugs = {team["slug"] for team in response.json()["results"]}
    return slugs, [q["sql"] for q in on_replica], [q["sql"] for q in on_primary]


def test_a_tokens_reads_go_to_the_replica_and_its_user_reads_their_own_api_writes_from_the_primary(
    replica_port, client, cast, settings
):
    settings.DATABASE_ROUTERS = ROUTERS
    _, writer = api_token_create(user=cast.admin, name="automation", scope="write")
    _, other = api_token_create(user=cast.finance, name="month-end", scope="read")
    replica_caught_up()

    slugs, on_replica, on_primary = _team_slugs(client, writer)
    assert "nlp" in slugs and any("org_team" in sql for sql in on_replica)
    assert any("api_apitoken" in sql for sql in on_primary)  # the token itself is looked up on the primary
    assert not any("org_team" in sql for sql in on_primary)

    with replay_paused():  # the replica falls behind from here
        Team.objects.create(slug="elsewhere", name="Written elsewhere")  # another user's write, on the primary
        slugs, _, _ = _team_slugs(client, writer)
        assert "elsewhere" not in slugs  # not replayed yet: a read on the replica may be a moment behind

        _, issued = api_token_create(user=cast.finance, name="issued-now", scope="read")  # on the primary only
        slugs, _, _ = _team_slugs(client, issued)  # authenticates all the same
        assert "elsewhere" not in slugs

        added = client.post(TEAMS, {"slug": "mine", "name": "Mine"}, content_type="application/json", **bearer(writer))
        assert added.status_code == 201 and COOKIE not in added.cookies  # no cookie: the mark is on the primary
        assert user_mark(cast.admin.pk)

        slugs, on_replica, _ = _team_slugs(client, writer)
        assert {"mine", "elsewhere"} <= slugs  # its user's own write: read from the primary
        assert len(on_replica) == 1  # only the replay position was asked of the replica
        slugs, on_replica, _ = _team_slugs(client, other)
        assert "mine" not in slugs and any("org_team" in sql for sql in on_replica)  # another user: the replica

    replica_caught_up()
    slugs, on_replica, _ = _team_slugs(client, writer)
    assert {"mine", "elsewhere"} <= slugs and any("org_team" in sql for sql in on_replica)  # the replica again


def test_a_collectors_posts_leave_no_mark_and_ask_the_primary_nothing_for_it(
    replica_port, client, cast, ingest_token, settings
):
    settings.DATABASE_ROUTERS = ROUTERS

    with CaptureQueriesContext(connection) as on_primary:
        response = client.post(
            "/api/v1/ingest/", batch_body([job_record(), sample_record()]), content_type="application/json",
            **bearer(ingest_token),
        )  # fmt: skip

    assert response.status_code == 202
    assert not WriteMark.objects.exists()
    assert not any("pg_current_wal_lsn" in q["sql"] for q in on_primary)


def test_rate_limits_count_on_the_primary_while_the_request_reads_the_replica(
    replica_port, client, cast, settings, monkeypatch, one_window
):
    settings.DATABASE_ROUTERS = ROUTERS
    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"user": "2/min", "ingest": "1200/min"})
    _, reader = api_token_create(user=cast.finance, name="month-end", scope="read")
    replica_caught_up()

    with replay_paused():  # a counter read on the replica would stand still at what it had before
        statuses = [client.get(TEAMS, **bearer(reader)).status_code for _ in range(3)]

    assert statuses == [200, 200, 429]
