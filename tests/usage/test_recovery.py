"""Faults on the real path: gunicorn, a Celery worker with beat, a Redis and a PostgreSQL the tests run themselves.

Each test breaks one piece while batches are in flight, brings it back, and checks that every batch was stored
once and processed once (sample counts exact, rollups not doubled). Each prints how long the system took to
recover, as `recovery_<fault>_s: N` lines; only a generous timeout is asserted.
"""

import os
import shutil
import signal
import time

import psycopg
import pytest
from django.db import connection

from tests.usage.faults import (
    PG_BINS,
    WORKER_APP,  # fmt: skip
    PostgresCluster,
    RedisServer,
    Web,
    Worker,
    batch,
    in_transaction,
    process_of_port,
    session_in_transaction,
    wait_until,
)

pytestmark = [
    pytest.mark.worker,
    pytest.mark.skipif(not os.environ.get("CELERY_BROKER_URL"), reason="needs CELERY_BROKER_URL (CI runs Redis)"),
    pytest.mark.skipif(not os.environ.get("DATABASE_URL"), reason="needs DATABASE_URL (PostgreSQL)"),
    pytest.mark.skipif(not shutil.which("redis-server"), reason="needs redis-server to run a Redis of its own"),
    pytest.mark.django_db(transaction=True),
]
RECOVERY_TIMEOUT_S = 120


def the_test_database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class Inbox:
    """The batches stored and processed, and the samples written, as one database sees them."""

    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, sql: str):
        with psycopg.connect(self.url, autocommit=True, connect_timeout=2) as db:
            return db.execute(sql).fetchone()

    def counts(self) -> tuple[int, int]:
        """(batches stored, batches processed)"""
        return self.query("SELECT count(*), count(processed_at) FROM usage_ingestbatch")

    def done(self, batches: int) -> bool:
        try:
            return self.counts() == (batches, batches)
        except psycopg.OperationalError:
            return False

    def samples(self) -> tuple[int, int, int]:
        """(samples, samples in the job rollup, samples in the GPU rollup)"""
        return self.query(
            "SELECT (SELECT count(*) FROM usage_sample), (SELECT coalesce(sum(samples), 0) FROM usage_jobgpuhour),"
            " (SELECT coalesce(sum(samples), 0) FROM usage_gpuhour)"
        )

    def caught_mid_transaction(self, timeout: float = 30) -> None:
        with psycopg.connect(self.url, autocommit=True) as db, db.cursor() as cursor:
            wait_until(lambda: in_transaction(cursor), timeout, "a worker session in a transaction")


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def stack(tmp_path, redis_server):
    """Web and worker on the test database and a Redis of the test's own."""
    database = the_test_database_url()
    web, worker = Web(database, redis_server.url, tmp_path), Worker(database, redis_server.url, tmp_path)
    worker.start()
    web.start()
    yield web, worker, Inbox(database)
    web.stop()
    worker.stop()


def post_all(web: Web, token: str, bodies: list[bytes]) -> list[float]:
    seconds = []
    for body in bodies:
        status, took = web.post(body, token)
        assert status == 202
        seconds.append(took)
    return seconds


def test_a_worker_killed_mid_batch_and_restarted_leaves_every_batch_processed_once(stack, ingest_token):
    web, worker, inbox = stack
    batches = [batch(n, samples=4000) for n in range(10)]
    post_all(web, ingest_token, [body for body, _ in batches])

    inbox.caught_mid_transaction()
    worker.kill()  # the whole worker, main process and pool children, mid-transaction
    time.sleep(3)
    worker.start()
    recovery = wait_until(lambda: inbox.done(len(batches)), RECOVERY_TIMEOUT_S, "every batch processed")

    expected = sum(n for _, n in batches)
    assert inbox.samples() == (expected, expected, expected)
    print(f"\nrecovery_worker_kill_s: {recovery:.1f} (from the restart)")


def test_a_pool_process_killed_while_its_session_holds_the_batch_row_leaves_every_batch_processed_once(
    stack, ingest_token
):
    """The worker gives the killed process's message back at once (reject_on_worker_lost); the next claim of the
    batch waits for the row its dead session still holds, instead of skipping it."""
    web, _, inbox = stack
    batches = [batch(n, samples=8000) for n in range(12)]
    post_all(web, ingest_token, [body for body, _ in batches[:2]])
    wait_until(lambda: inbox.done(2), 60, "the first batches processed")
    with psycopg.connect(inbox.url, autocommit=True) as db, db.cursor() as cursor:
        # A worker process keeps its session from one batch to the next: which process holds which is known ahead.
        cursor.execute(
            "SELECT client_port FROM pg_stat_activity WHERE application_name = %s AND datname = current_database()",
            [WORKER_APP],
        )
        processes = {port: process_of_port(port) for (port,) in cursor.fetchall()}
        post_all(web, ingest_token, [body for body, _ in batches[2:]])
        ports: list[int | None] = []
        wait_until(lambda: ports.append(session_in_transaction(cursor)) or ports[-1] in processes, 30, "mid-batch")
        pid = processes[ports[-1]]
    os.kill(pid, signal.SIGKILL)  # one pool process; the worker lives on
    killed = time.monotonic()
    wait_until(lambda: inbox.done(len(batches)), RECOVERY_TIMEOUT_S, "every batch processed")
    recovery = time.monotonic() - killed

    expected = sum(n for _, n in batches)
    assert inbox.samples() == (expected, expected, expected)
    print(f"\nrecovery_pool_process_kill_s: {recovery:.1f} (from the kill)")


def test_a_redis_restart_loses_no_batch_and_ingest_answers_quickly_while_it_is_down(stack, redis_server, ingest_token):
    web, _, inbox = stack
    batches = [batch(n, samples=500) for n in range(12)]
    up = post_all(web, ingest_token, [body for body, _ in batches[:3]])
    wait_until(lambda: inbox.done(3), 60, "the first batches processed")

    redis_server.stop()  # with no persistence: whatever it held is gone
    down = post_all(web, ingest_token, [body for body, _ in batches[3:9]])
    time.sleep(8)
    redis_server.start()
    started = time.monotonic()
    post_all(web, ingest_token, [body for body, _ in batches[9:]])
    wait_until(lambda: inbox.done(len(batches)), RECOVERY_TIMEOUT_S, "every batch processed")
    recovery = time.monotonic() - started

    expected = sum(n for _, n in batches)
    assert inbox.samples() == (expected, expected, expected)
    print(f"\nrecovery_redis_restart_s: {recovery:.1f} (from Redis back)")
    print(f"ingest_post_ms_broker_up_max: {max(up) * 1000:.0f}")
    print(f"ingest_post_ms_broker_down_max: {max(down) * 1000:.0f}")
    print(f"ingest_post_ms_broker_down_median: {sorted(down)[len(down) // 2] * 1000:.0f}")


@pytest.mark.skipif(not PG_BINS, reason="needs PostgreSQL's server binaries to run a cluster of its own")
def test_a_postgresql_restart_mid_batch_leaves_every_batch_processed_once(tmp_path, redis_server, ingest_token):
    cluster = PostgresCluster()
    try:
        cluster.start()
        cluster.load(the_test_database_url())  # the schema, and the token the fixture made
        web, worker = Web(cluster.url, redis_server.url, tmp_path), Worker(cluster.url, redis_server.url, tmp_path)
        inbox = Inbox(cluster.url)
        worker.start()
        web.start()
        try:
            batches = [batch(n, samples=4000) for n in range(10)]
            post_all(web, ingest_token, [body for body, _ in batches])

            inbox.caught_mid_transaction()
            cluster.stop("immediate")  # a crash, as far as the database can tell
            time.sleep(8)
            cluster.start()
            recovery = wait_until(lambda: inbox.done(len(batches)), RECOVERY_TIMEOUT_S, "every batch processed")

            expected = sum(n for _, n in batches)
            assert inbox.samples() == (expected, expected, expected)
            print(f"\nrecovery_postgres_restart_s: {recovery:.1f} (from PostgreSQL back)")
        finally:
            web.stop()
            worker.stop()
    finally:
        cluster.remove()
