"""A worker reconnects to a broker that was away for a long time within seconds of its return, as it does after a
short outage: the interval between its reconnect tries is capped (BROKER_RECONNECT_MAX_S), and it never gives up.
A real worker, started as docker-compose starts the ingest workers, on a Redis of the test's own (stopped and
started by the test, never the shared one), which goes away while a batch is in flight (its message unacknowledged).
GG_BROKER_OUTAGES_S="20,60" measures those outages (run with -s)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kombu import Connection

from governance.celery import app as celery_app
from governance.usage import services
from governance.usage.models import IngestBatch
from governance.usage.services import usage_batch_receive
from tests.factories import at, batch_body, job_record, series
from tests.usage.faults import RedisServer, wait_until
from tests.usage.test_worker import _test_database_url
from tests.usage.test_worker import pytestmark as worker_marks

pytestmark = worker_marks
ROOT = Path(__file__).resolve().parents[2]
OUTAGES_S = [float(s) for s in os.environ.get("GG_BROKER_OUTAGES_S", "40").split(",")]


def ingest_worker(broker_url: str, folder: Path) -> tuple[subprocess.Popen, Path]:
    """The ingest worker of docker-compose.yml (prefork, 2 processes), on the test database, where the batches of
    the collector `slow` take 3 s more; (process, pidfile)."""
    pidfile = folder / "worker.pid"
    env = {
        **os.environ, "DATABASE_URL": _test_database_url(), "CELERY_BROKER_URL": broker_url,
        "GG_SLOW_COLLECTOR": "slow", "GG_SLOW_S": "3",
    }  # fmt: skip
    command = [
        sys.executable, "-m", "celery", "-A", "tests.usage.fault_worker", "worker", "-Q", "ingest",
        "--concurrency", "2", "--prefetch-multiplier", "1", "--without-mingle", "--without-gossip",
        "--pidfile", str(pidfile), "--loglevel", "INFO",
    ]  # fmt: skip
    with (folder / "worker.log").open("a") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    return process, pidfile


def store(n: int, collector: str = "test") -> int:
    """A batch in the inbox, as the web stores one while the broker is down (the worker's sweep enqueues it)."""
    start = at("2026-11-03T09:00:00Z")
    records = [job_record(job_id=f"r{n}"), *series(start=start, minutes=5, job_id=f"r{n}", gpu_uuid=f"GPU-r{n}")]
    body = batch_body(records, collector=collector)
    return IngestBatch.objects.get(batch_id=usage_batch_receive(body=body).batch_id).pk


def processed(pk: int) -> bool:
    return IngestBatch.objects.filter(pk=pk, processed_at__isnull=False).exists()


@pytest.mark.parametrize("outage_s", OUTAGES_S)
def test_a_worker_processes_batches_again_soon_after_a_long_broker_outage(tmp_path, monkeypatch, outage_s):
    monkeypatch.setattr(services, "_enqueue", lambda inbox_pk: None)
    redis = RedisServer(tmp_path / "redis")
    redis.start()
    process, pidfile = ingest_worker(redis.url, tmp_path)
    try:
        in_flight = store(0, collector="slow")
        wait_until(lambda: IngestBatch.objects.get(pk=in_flight).attempts == 1, 120, "the worker took the first batch")

        redis.stop()
        time.sleep(outage_s / 2)
        during = store(1)  # stored while the broker is away
        time.sleep(outage_s / 2)
        redis.start()
        back = time.monotonic()
        wait_until(lambda: processed(during), 120, "the worker took the batch stored during the outage")
        recovered_s = time.monotonic() - back
        print(f"\nbroker outage {outage_s:.0f} s: batches processed again {recovered_s:.1f} s after Redis was back")
        after = store(2)
        with Connection(redis.url) as broker:  # sent as the web sends it, to the test's broker
            celery_app.send_task(services.PROCESS_TASK, args=[after], connection=broker)
        wait_until(lambda: processed(after), 120, "the worker took a batch stored after the outage")
        alive = process.poll() is None
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
        else:
            process.terminate()
        process.wait(timeout=30)
        redis.stop()

    assert alive and processed(in_flight) and processed(during) and processed(after)
