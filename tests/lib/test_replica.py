"""Pages read a real PostgreSQL streaming replica, started here, and a user reads their own writes from the primary.

The replica is a `pg_basebackup -R` of the test server (PostgreSQL at DATABASE_URL) into a temporary directory,
started with pg_ctl on a free port of its own and stopped at the end. The primary must accept replication
connections from 127.0.0.1 (pg_hba.conf: `host replication postgres 127.0.0.1/32 trust`; .ci/run adds it).
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.test.utils import CaptureQueriesContext

from governance.lib.replica import COOKIE, REPLICA
from governance.org.models import Team

PG_BIN = Path("/usr/lib/postgresql/15/bin")
ROUTERS = ["governance.lib.replica.ReplicaRouter"]
SLOT_PREFIX = "gg_test_replica_"

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="a streaming replica is PostgreSQL's"),
    pytest.mark.django_db(transaction=True, databases=[DEFAULT_DB_ALIAS, REPLICA]),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(args: list[str]) -> subprocess.CompletedProcess:
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=300, check=False)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _slots_drop(*, inactive_only: bool) -> None:
    """Drop this test's replication slots on the primary (those no standby is streaming from)."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
            " WHERE slot_name LIKE %s AND (NOT active OR NOT %s)",
            [f"{SLOT_PREFIX}%", inactive_only],
        )


@pytest.fixture(scope="module")
def replica_port(django_db_blocker) -> Iterator[int]:
    """A hot standby of the test server, streaming from it, on a port of its own."""
    with django_db_blocker.unblock():
        yield from _replica()


def _replica() -> Iterator[int]:
    if not (PG_BIN / "pg_ctl").exists() or shutil.which("pg_basebackup") is None:
        _unavailable("PostgreSQL 15's pg_ctl and pg_basebackup are needed to start a replica")
    primary = connections[DEFAULT_DB_ALIAS].settings_dict
    root = Path(tempfile.mkdtemp(prefix="gg-replica-"))
    data, port = root / "data", _free_port()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    # A slot of its own keeps the WAL the standby has not received yet (a busy primary recycles it otherwise, and
    # the standby stops at the gap); it is dropped at the end, and so are slots a killed run left behind.
    slot = f"{SLOT_PREFIX}{port}"
    _slots_drop(inactive_only=True)
    # -c fast: the backup starts at once instead of after the server's next scheduled checkpoint.
    backup = _as_postgres([
        "pg_basebackup", "-h", primary["HOST"] or "127.0.0.1", "-p", str(primary["PORT"] or 5432), "-U", "postgres",
        "-D", str(data), "-R", "-X", "stream", "-c", "fast", "-C", "-S", slot,
    ])  # fmt: skip
    if backup.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        _slots_drop(inactive_only=True)
        _unavailable(f"pg_basebackup failed (replication allowed in pg_hba.conf?): {backup.stderr.strip()}")
    # The copy has the primary's data but (on Debian) not its configuration files: the standby gets its own.
    (data / "postgresql.conf").write_text(
        f"port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{root}'\n"
        "hot_standby = on\nshared_buffers = 32MB\nfsync = off\n"
    )
    (data / "pg_hba.conf").write_text("local all all trust\nhost all all 127.0.0.1/32 trust\n")
    (data / "pg_ident.conf").write_text("")
    if os.geteuid() == 0:
        for path in (data / "postgresql.conf", data / "pg_hba.conf", data / "pg_ident.conf"):
            shutil.chown(path, "postgres")
    started = _as_postgres(
        [str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-t", "60", "start"]
    )
    try:
        if started.returncode != 0:
            log = (root / "log").read_text() if (root / "log").exists() else ""
            pytest.fail(f"the replica did not start: {started.stderr.strip()} {log[-2000:]}")
        connections.settings[REPLICA] = {**primary, "PORT": str(port), "TEST": {**primary["TEST"], "MIRROR": "default"}}
        yield port
    finally:
        if REPLICA in connections.settings:
            connections[REPLICA].close()
            del connections.settings[REPLICA]
        _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])
        _slots_drop(inactive_only=True)
        shutil.rmtree(root, ignore_errors=True)


def _on_replica(sql: str) -> object:
    with connections[REPLICA].cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


def _replica_caught_up() -> None:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_flush_lsn()::text")
        lsn = cursor.fetchone()[0]
    # The replica replays the whole server's WAL, other databases' included: on a busy shared server that takes time.
    for _ in range(1200):
        if _on_replica(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn"):
            return
        time.sleep(0.1)
    state = _on_replica("SELECT pg_last_wal_receive_lsn()::text || ' received, ' || pg_last_wal_replay_lsn()::text")
    raise AssertionError(f"the replica did not replay up to {lsn} in 120 s: {state} replayed")


def _teams_page(client) -> tuple[str, int]:
    """The admin's team list as the user sees it, and how many statements ran on the replica for it."""
    with CaptureQueriesContext(connections[REPLICA]) as on_replica:
        response = client.get("/admin/org/team/")
    assert response.status_code == 200
    return response.content.decode(), len(on_replica)


def test_pages_read_the_replica_and_a_user_reads_their_own_writes_from_the_primary(
    replica_port, client, cast, settings
):
    settings.DATABASE_ROUTERS = ROUTERS
    cast.admin.is_superuser = True
    cast.admin.save()
    client.force_login(cast.admin)
    assert _on_replica("SELECT pg_is_in_recovery()") is True
    _replica_caught_up()

    page, replica_statements = _teams_page(client)
    assert "Vision" in page and replica_statements > 1  # the session, the user and the list came from the replica

    _on_replica("SELECT pg_wal_replay_pause()")  # the replica falls behind from here
    try:
        Team.objects.create(slug="elsewhere", name="Written elsewhere")  # another user's write, on the primary
        page, _ = _teams_page(client)
        assert "Written elsewhere" not in page  # not replayed yet: a page on the replica may be a moment behind

        added = client.post("/admin/org/team/add/", {
            "slug": "mine", "name": "Mine", "lead_email": "",
            "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0",
        })  # fmt: skip
        assert added.status_code == 302 and COOKIE in added.cookies

        page, replica_statements = _teams_page(client)
        assert "Mine" in page and "Written elsewhere" in page  # their own write: read from the primary
        assert replica_statements == 1  # only the replay position was asked of the replica
    finally:
        _on_replica("SELECT pg_wal_replay_resume()")

    _replica_caught_up()
    page, replica_statements = _teams_page(client)
    assert "Mine" in page and "Written elsewhere" in page and replica_statements > 1  # the replica again


def test_a_page_is_served_from_the_primary_when_the_replica_does_not_answer(replica_port, client, cast, settings):
    settings.DATABASE_ROUTERS = ROUTERS
    cast.admin.is_superuser = True
    cast.admin.save()
    client.force_login(cast.admin)
    connections[REPLICA].close()
    gone = {**connections.settings[REPLICA]}
    connections.settings[REPLICA]["PORT"] = str(_free_port())  # nothing listens there
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
