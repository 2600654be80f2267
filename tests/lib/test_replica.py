"""Pages read a real PostgreSQL streaming replica, started here, and a user reads their own writes from the primary.
The raw SQL a page reads with (heatmap cells, queue-wait boxes) goes where its ORM reads go.

The replica: tests/replica_server.py (the `replica_port` fixture, tests/lib/conftest.py).
"""

import pytest
from django.contrib.sessions.models import Session
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import F
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext

from governance.costs.models import Charge
from governance.dashboard import grid
from governance.lib.replica import COOKIE, REPLICA, ReplicaReadMiddleware, _primary_lsn, reading_connection
from governance.org.models import Membership, Team, User
from governance.usage.models import GpuHour, Job, NodeHour
from tests.factories import at, ingest, job_record, rate, series
from tests.replica_server import ROUTERS, free_port, replay_paused, replica_caught_up, replica_says

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="a streaming replica is PostgreSQL's"),
    pytest.mark.django_db(transaction=True, databases=[DEFAULT_DB_ALIAS, REPLICA]),
]


def _teams_page(client) -> tuple[str, int]:
    """The admin's team list as the user sees it, and how many statements ran on the replica for it."""
    with CaptureQueriesContext(connections[REPLICA]) as on_replica:
        response = client.get("/admin/org/team/")
    assert response.status_code == 200
    return response.content.decode(), len(on_replica)


def _superuser_signed_in(client, cast) -> None:
    """The admin, a superuser (the admin site's team list), signed in on `client`."""
    cast.admin.is_superuser = True
    cast.admin.save()
    client.force_login(cast.admin)


def _team_mine_added(client) -> HttpResponse:
    """The signed-in user adds team "mine" through the admin site."""
    return client.post("/admin/org/team/add/", {
        "slug": "mine", "name": "Mine", "lead_email": "",
        "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0",
    })  # fmt: skip


def test_pages_read_the_replica_and_a_user_reads_their_own_writes_from_the_primary(
    replica_port, client, cast, settings
):
    settings.DATABASE_ROUTERS = ROUTERS
    _superuser_signed_in(client, cast)
    assert replica_says("SELECT pg_is_in_recovery()") is True
    replica_caught_up()

    page, replica_statements = _teams_page(client)
    assert "Vision" in page and replica_statements > 1  # the list came from the replica (the user from the primary)

    with replay_paused():  # the replica falls behind from here
        Team.objects.create(slug="elsewhere", name="Written elsewhere")  # another user's write, on the primary
        page, _ = _teams_page(client)
        assert "Written elsewhere" not in page  # not replayed yet: a page on the replica may be a moment behind

        added = _team_mine_added(client)
        assert added.status_code == 302 and COOKIE in added.cookies

        page, replica_statements = _teams_page(client)
        assert "Mine" in page and "Written elsewhere" in page  # their own write: read from the primary
        assert replica_statements == 1  # only the replay position was asked of the replica

    replica_caught_up()
    page, replica_statements = _teams_page(client)
    assert "Mine" in page and "Written elsewhere" in page and replica_statements > 1  # the replica again


def test_a_user_reads_their_own_write_in_another_browser_and_when_an_earlier_writes_answer_came_last(
    replica_port, client, cast, settings
):
    settings.DATABASE_ROUTERS = ROUTERS
    _superuser_signed_in(client, cast)
    other_browser = Client()
    other_browser.force_login(cast.admin)
    earlier = _primary_lsn()  # where an earlier write of this user would have left this browser's cookie
    replica_caught_up()

    with replay_paused():
        added = _team_mine_added(client)
        assert added.status_code == 302

        page, replica_statements = _teams_page(other_browser)  # no cookie of the write: the user's mark
        assert "Mine" in page and replica_statements == 2  # both replay questions; the page from the primary

        client.cookies[COOKIE] = earlier  # the answer of a write in flight beside this one, with an older position,
        page, replica_statements = _teams_page(client)  # arrived last: the replica has that one
        assert "Mine" in page and replica_statements == 2  # but not the user's mark: the primary

    replica_caught_up()
    page, replica_statements = _teams_page(other_browser)
    assert "Mine" in page and replica_statements > 2  # replayed: the replica again


def test_a_user_signed_out_deactivated_or_taken_off_a_team_is_refused_at_once_while_the_replica_lags(
    replica_port, cast, settings
):
    settings.DATABASE_ROUTERS = ROUTERS
    lead, alice, finance = Client(), Client(), Client()
    for client, user in ((lead, cast.nlp_lead), (alice, cast.alice), (finance, cast.finance)):
        client.force_login(user)
    replica_caught_up()
    assert [c.get(url).status_code for c, url in ((lead, "/costs/team/nlp/"), (alice, "/me/"), (finance, "/costs/"))] \
        == [200, 200, 200]  # fmt: skip

    with replay_paused():  # an admin's changes, on the primary only
        Membership.objects.filter(user=cast.nlp_lead, team=cast.nlp).delete()
        User.objects.filter(pk=cast.alice.pk).update(is_active=False)
        Session.objects.filter(session_key=finance.session.session_key).delete()  # signed out in another tab
        assert replica_says(f"SELECT count(*) FROM org_membership WHERE user_id = {cast.nlp_lead.pk}") == 1

        with CaptureQueriesContext(connections[REPLICA]) as on_replica:
            answers = [c.get(url) for c, url in ((lead, "/costs/team/nlp/"), (alice, "/me/"), (finance, "/costs/"))]

    assert answers[0].status_code in (403, 404)
    assert [a.status_code for a in answers[1:]] == [302, 302]
    assert all(a["Location"].startswith("/accounts/login/") for a in answers[1:])
    access = ("django_session", "org_user", "org_membership")
    assert not [q["sql"] for q in on_replica if any(table in q["sql"] for table in access)]


def test_a_page_is_served_from_the_primary_when_the_replica_does_not_answer(replica_port, client, cast, settings):
    settings.DATABASE_ROUTERS = ROUTERS
    _superuser_signed_in(client, cast)
    connections[REPLICA].close()
    gone = {**connections.settings[REPLICA]}
    connections.settings[REPLICA]["PORT"] = str(free_port())  # nothing listens there
    try:
        response = client.get("/admin/org/team/")
    finally:
        connections[REPLICA].close()
        connections.settings[REPLICA].update(gone)
    assert response.status_code == 200 and "Vision" in response.content.decode()


def test_every_write_still_goes_to_the_primary(replica_port, client, cast, settings):
    settings.DATABASE_ROUTERS = ROUTERS
    client.force_login(cast.admin)

    response = client.post("/api/v1/teams/", {"slug": "api-team", "name": "Api team"}, content_type="application/json")

    assert response.status_code == 201 and COOKIE in response.cookies
    assert Team.objects.using(DEFAULT_DB_ALIAS).filter(slug="api-team").exists()


def test_a_client_without_a_session_is_given_no_replay_cookie(replica_port, client, settings):
    settings.DATABASE_ROUTERS = ROUTERS

    response = client.post("/api/v1/teams/", {"slug": "x", "name": "X"}, content_type="application/json")

    assert response.status_code in (401, 403) and COOKIE not in response.cookies
    assert not Team.objects.filter(slug="x").exists()


# Raw SQL a page reads with (the heatmap's cells, the overview's queue-wait boxes) follows the router.

DAY = {"start": "2026-11-03", "end": "2026-11-03"}


def _two_gpus_busy_at_90() -> None:
    ingest([
        job_record(job_id="1", gpus=2, submit_time="2026-11-03T09:30:00Z", start_time="2026-11-03T10:00:00Z",
                   end_time="2026-11-03T12:00:00Z", state="completed"),
        *series(start=at("2026-11-03T10:00:00Z"), minutes=120, every_s=600, job_id="1", sm_util=90.0),
        *series(start=at("2026-11-03T10:00:00Z"), minutes=120, every_s=600, job_id="1", gpu_uuid="GPU-1",
                gpu_index=1, sm_util=90.0),
    ])  # fmt: skip


def _heatmap_at_ten(client) -> tuple[list[float], list[str]]:
    """The heatmap's 10:00 column as the user sees it, and the statements that ran on the replica for it."""
    with CaptureQueriesContext(connections[REPLICA]) as on_replica:
        response = client.get("/cluster/", DAY)
    assert response.status_code == 200
    trace = response.context["charts"][0].figure["data"][0]
    return [row[10] for row in trace["z"]], [q["sql"] for q in on_replica]


def _primary_lsn_cookie(client) -> None:
    """What the user's last write answered with: the primary's WAL position after it."""
    client.cookies[COOKIE] = _primary_lsn()


def test_the_heatmap_reads_its_cells_on_the_replica_and_a_user_who_wrote_reads_the_primarys(
    replica_port, client, cast, settings, monkeypatch
):
    settings.DATABASE_ROUTERS = ROUTERS
    _two_gpus_busy_at_90()
    client.force_login(cast.admin)
    wrote = Client()
    wrote.force_login(cast.alice)
    replica_caught_up()

    with replay_paused():
        # Written on the primary only, and read by the cells' raw SQL only: 90% becomes 30%, per GPU and per node.
        GpuHour.objects.update(sm_sum=F("sm_samples") * 30.0)
        NodeHour.objects.update(sm_sum=F("sm_samples") * 30.0)
        _primary_lsn_cookie(wrote)

        column, on_replica = _heatmap_at_ten(client)
        assert column == [90.0, 90.0]  # the replica's GPU-hours
        assert any("usage_gpuhour" in sql for sql in on_replica)
        column, on_replica = _heatmap_at_ten(wrote)
        assert column == [30.0, 30.0] and len(on_replica) == 1  # the primary's; the replica gave its position only

        monkeypatch.setattr(grid, "MAX_ROWS", 1)  # two GPUs are too many rows: a row per node, from NodeHour
        column, on_replica = _heatmap_at_ten(client)
        assert column == [90.0] and any("usage_nodehour" in sql for sql in on_replica)
        column, _ = _heatmap_at_ten(wrote)
        assert column == [30.0]


def _queue_medians(client) -> tuple[dict[str, list[float]], list[str]]:
    with CaptureQueriesContext(connections[REPLICA]) as on_replica:
        response = client.get("/", {"month": "2026-11"})
    assert response.status_code == 200
    boxes = next(c for c in response.context["charts"] if c.id == "queue-wait").figure["data"]
    return {box["name"]: box["median"] for box in boxes}, [q["sql"] for q in on_replica]


def test_the_overviews_queue_wait_boxes_are_read_on_the_replica_unless_the_user_wrote_since(
    replica_port, client, cast, settings
):
    settings.DATABASE_ROUTERS = ROUTERS
    # Three jobs of NLP submitted at 09:00 and started at 10, 11 and 12: waits of 60, 120 and 180 minutes.
    ingest([
        job_record(job_id=str(n), submit_time="2026-11-03T09:00:00Z", start_time=f"2026-11-03T{9 + n:02}:00:00Z")
        for n in (1, 2, 3)
    ])  # fmt: skip
    client.force_login(cast.admin)
    wrote = Client()
    wrote.force_login(cast.admin)
    replica_caught_up()

    with replay_paused():
        Job.objects.filter(external_id="2").update(submit_time=at("2026-11-03T10:55:00Z"))  # 120 -> 5 minutes
        _primary_lsn_cookie(wrote)

        medians, on_replica = _queue_medians(client)
        assert medians == {"NLP": [120.0]} and any("percentile_cont" in sql for sql in on_replica)
        medians, on_replica = _queue_medians(wrote)
        assert medians == {"NLP": [60.0]} and not any("percentile_cont" in sql for sql in on_replica)


def test_a_replica_that_does_not_answer_sends_the_heatmaps_raw_reads_to_the_primary(
    replica_port, client, cast, settings
):
    settings.DATABASE_ROUTERS = ROUTERS
    _two_gpus_busy_at_90()
    client.force_login(cast.admin)
    connections[REPLICA].close()
    gone = {**connections.settings[REPLICA]}
    connections.settings[REPLICA]["PORT"] = str(free_port())  # nothing listens there
    try:
        with CaptureQueriesContext(connections[DEFAULT_DB_ALIAS]) as on_primary:
            response = client.get("/cluster/", DAY)
    finally:
        connections[REPLICA].close()
        connections.settings[REPLICA].update(gone)
    assert response.status_code == 200
    assert [row[10] for row in response.context["charts"][0].figure["data"][0]["z"]] == [90.0, 90.0]
    assert any("usage_gpuhour" in q["sql"] for q in on_primary)


def test_raw_reads_go_to_the_primary_once_a_request_wrote_or_when_it_is_a_write(replica_port, cast, settings):
    settings.DATABASE_ROUTERS = ROUTERS
    seen: list[str] = []

    def view(request: HttpRequest) -> HttpResponse:
        seen.append(reading_connection(GpuHour).alias)
        with transaction.atomic():
            seen.append(reading_connection(GpuHour).alias)  # inside a transaction on the primary
        Team.objects.create(slug=f"t{len(seen)}", name=f"Team {len(seen)}")  # the request writes
        seen.append(reading_connection(GpuHour).alias)
        return HttpResponse()

    middleware = ReplicaReadMiddleware(view)
    middleware(RequestFactory().get("/cluster/"))
    middleware(RequestFactory().post("/cluster/"))

    assert seen == [REPLICA, DEFAULT_DB_ALIAS, DEFAULT_DB_ALIAS] + [DEFAULT_DB_ALIAS] * 3
    assert reading_connection(GpuHour).alias == DEFAULT_DB_ALIAS  # outside a request: the primary


def _team_focus_csv(client) -> str:
    """The team's FOCUS CSV as downloaded: its rows stream after the view has returned."""
    response = client.get("/costs/team/nlp/chargeback.csv", {"month": "2026-11"})
    body = b"".join(response.streaming_content).decode()
    assert response.status_code == 200 and body.startswith("BilledCost,")
    return body


def test_the_team_focus_csv_streams_from_the_replica_unless_the_user_wrote_since(replica_port, client, cast, settings):
    settings.DATABASE_ROUTERS = ROUTERS
    rate(price="2.00")
    _two_gpus_busy_at_90()
    client.force_login(cast.finance)
    wrote = Client()
    wrote.force_login(cast.finance)
    replica_caught_up()

    with replay_paused():
        Charge.objects.filter(user_name="alice").update(user_name="renamed")  # on the primary only
        _primary_lsn_cookie(wrote)

        body = _team_focus_csv(client)  # COPY runs on psycopg's own cursor, which no query capture sees: the rows tell
        assert '""user"": ""alice""' in body and "renamed" not in body
        body = _team_focus_csv(wrote)
        assert '""user"": ""renamed""' in body and "alice" not in body
