"""A batch that kills its worker every time (a crash no `except` sees) is set aside as dead after
INGEST_MAX_ATTEMPTS attempts, each counted before its work started; the other batches are processed. A real
Celery worker on a Redis of the test's own, restarted by the test after each death."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from governance.usage import services
from governance.usage.models import IngestBatch, Sample
from governance.usage.services import usage_batch_receive
from governance.usage.writer.inbox import ATTEMPT_UNFINISHED
from tests.factories import at, batch_body, job_record, series
from tests.usage.fault_worker import POISON_EXIT
from tests.usage.faults import RedisServer, wait_until
from tests.usage.test_worker import _test_database_url
from tests.usage.test_worker import pytestmark as worker_marks

pytestmark = worker_marks
ROOT = Path(__file__).resolve().parents[2]
MAX_ATTEMPTS = 3


class PoisonWorker:
    """`celery worker` (solo pool: the task runs in the process the poison kills), stopped by its pidfile."""

    def __init__(self, broker_url: str, folder: Path) -> None:
        self.pidfile, self.log = folder / "worker.pid", folder / "worker.log"
        self.env = {
            **os.environ,
            "DATABASE_URL": _test_database_url(),
            "CELERY_BROKER_URL": broker_url,
            "INGEST_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
            "GG_POISON_COLLECTOR": "poison",
        }
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        command = [
            sys.executable, "-m", "celery", "-A", "tests.usage.fault_worker", "worker", "-Q", "ingest,analysis",
            "--pool", "solo", "--pidfile", str(self.pidfile), "--loglevel", "INFO", "--without-heartbeat",
            "--without-gossip", "--without-mingle",
        ]  # fmt: skip
        with self.log.open("a") as log:
            self.process = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)

    def exit_code(self) -> int | None:
        assert self.process is not None
        return self.process.poll()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        if self.pidfile.exists():
            os.kill(int(self.pidfile.read_text().strip()), signal.SIGTERM)
        else:
            self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


def store(body: bytes) -> IngestBatch:
    receipt = usage_batch_receive(body=body)
    return IngestBatch.objects.get(batch_id=receipt.batch_id)


def test_a_batch_that_kills_its_worker_each_time_is_dead_after_the_set_attempts_and_the_others_land(
    tmp_path, redis_server, monkeypatch
):
    # The batches reach the worker as a restarted worker finds them: its inbox sweep on connecting to the broker.
    monkeypatch.setattr(services, "_enqueue", lambda inbox_pk: None)
    start = at("2026-11-03T09:00:00Z")
    poison = store(
        batch_body([job_record(job_id="p"), *series(start=start, minutes=10, job_id="p")], collector="poison")
    )
    good = [
        store(
            batch_body(
                [job_record(job_id=f"g{n}"), *series(start=start, minutes=10, job_id=f"g{n}", gpu_uuid=f"GPU-g{n}")]
            )
        )
        for n in range(2)
    ]
    worker = PoisonWorker(redis_server.url, tmp_path)

    deaths = 0
    try:
        for _ in range(MAX_ATTEMPTS + 2):
            worker.start()
            wait_until(
                lambda: (
                    worker.exit_code() is not None
                    or IngestBatch.objects.filter(processed_at__isnull=True, dead_at__isnull=True).count() == 0
                ),
                120,
                "the worker died or finished the inbox",
            )
            if worker.exit_code() is None:
                break
            deaths += 1
            assert worker.exit_code() == POISON_EXIT
            assert IngestBatch.objects.get(pk=poison.pk).attempts == deaths  # counted although the worker died
        time.sleep(1)  # the duplicates the sweeps enqueued find nothing to do
        alive = worker.exit_code() is None
    finally:
        worker.stop()

    poison.refresh_from_db()
    assert alive and deaths == MAX_ATTEMPTS
    assert poison.dead_at is not None and poison.processed_at is None
    assert (poison.attempts, poison.last_error) == (MAX_ATTEMPTS, ATTEMPT_UNFINISHED)
    for batch in good:
        batch.refresh_from_db()
        assert batch.processed_at is not None and batch.dead_at is None
    assert Sample.objects.count() == 2 * 10
    assert not Sample.objects.filter(job__external_id="p").exists()
