"""A real PostgreSQL streaming replica of the test server for the replica tests (tests/lib/test_replica*.py).

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
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import DEFAULT_DB_ALIAS, connections

from governance.lib.replica import REPLICA

PG_BIN = Path("/usr/lib/postgresql/15/bin")
ROUTERS = ["governance.lib.replica.ReplicaRouter"]
SLOT_PREFIX = "gg_test_replica_"


def free_port() -> int:
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


def replica_started() -> Iterator[int]:
    """A hot standby of the test server, streaming from it, on a port of its own (its port), stopped after."""
    if not (PG_BIN / "pg_ctl").exists() or shutil.which("pg_basebackup") is None:
        _unavailable("PostgreSQL 15's pg_ctl and pg_basebackup are needed to start a replica")
    primary = connections[DEFAULT_DB_ALIAS].settings_dict
    root = Path(tempfile.mkdtemp(prefix="gg-replica-"))
    data, port = root / "data", free_port()
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
            # The connection object too: it keeps its settings (this port), and a replica started again later (the
            # package's tests resumed after another package's, on the same xdist worker) is on another port.
            del connections[REPLICA]
            del connections.settings[REPLICA]
        _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])
        _slots_drop(inactive_only=True)
        shutil.rmtree(root, ignore_errors=True)


def replica_says(sql: str) -> object:
    with connections[REPLICA].cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


@contextmanager
def replay_paused() -> Iterator[None]:
    """The replica stops replaying the primary's WAL for the duration (what the primary writes meanwhile, it lacks),
    and replays again afterwards, whatever happened."""
    replica_says("SELECT pg_wal_replay_pause()")
    try:
        yield
    finally:
        replica_says("SELECT pg_wal_replay_resume()")


def replica_caught_up() -> None:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_flush_lsn()::text")
        lsn = cursor.fetchone()[0]
    # The replica replays the whole server's WAL, other databases' included: on a busy shared server that takes time.
    for _ in range(1200):
        if replica_says(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn"):
            return
        time.sleep(0.1)
    state = replica_says("SELECT pg_last_wal_receive_lsn()::text || ' received, ' || pg_last_wal_replay_lsn()::text")
    # What both ends say of the stream, for the next time this fails (once under `-n 2`, the replica stopped at a
    # WAL segment's boundary; the cause was not found).
    receiver = replica_says(
        "SELECT coalesce((SELECT status || ', flushed ' || flushed_lsn::text || ', last message '"
        " || last_msg_receipt_time::text FROM pg_stat_wal_receiver), 'no WAL receiver')"
    )
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(
            "SELECT pg_current_wal_insert_lsn()::text, coalesce((SELECT string_agg(state || ' sent ' || sent_lsn::text"
            " || ' replayed ' || coalesce(replay_lsn::text, '-'), '; ') FROM pg_stat_replication), 'no sender')"
        )
        inserted, sender = cursor.fetchone()
    raise AssertionError(
        f"the replica did not replay up to {lsn} in 120 s: {state} replayed; its receiver: {receiver};"
        f" the primary inserted up to {inserted}, its senders: {sender}"
    )
