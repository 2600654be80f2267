"""A batch posted over HTTP and processed by a real Celery worker process on a real broker."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from governance.celery import app as celery_app
from governance.usage.models import GpuHour, IngestBatch, JobGpuHour, Sample
from tests.factories import at, batch_body, job_record, series

BROKER = os.environ.get("CELERY_BROKER_URL", "")
pytestmark = [
    pytest.mark.worker,
    pytest.mark.skipif(not BROKER, reason="needs CELERY_BROKER_URL (a real Redis or RabbitMQ)"),
    pytest.mark.skipif(not os.environ.get("DATABASE_URL"), reason="needs DATABASE_URL (PostgreSQL)"),
    pytest.mark.django_db(transaction=True),
]

ROOT = Path(__file__).resolve().parents[2]
WORKER_APP = "test-celery-worker"  # the worker's sessions, told apart from the live server's and the test's


def _test_database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def worker(tmp_path):
    """A real `celery worker` on the test database; stopped by the pid in its pidfile."""
    pidfile = tmp_path / "worker.pid"
    log = (tmp_path / "worker.log").open("w")
    env = {
        **os.environ,
        "DATABASE_URL": f"{_test_database_url()}?application_name={WORKER_APP}",
        "CELERY_BROKER_URL": BROKER,
    }
    command = [
        sys.executable, "-m", "celery", "-A", "governance", "worker", "-Q", "ingest,analysis",
        "--pool", "solo", "--pidfile", str(pidfile), "--loglevel", "INFO", "--without-heartbeat", "--without-gossip",
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    celery_app.conf.task_always_eager = False
    try:
        yield process
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
        else:
            process.terminate()
        process.wait(timeout=30)
        log.close()


def wait_until(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("the worker did not process the batch in time")


def test_a_batch_posted_over_http_is_processed_by_a_real_worker(client, ingest_token, worker):
    assert not settings.CELERY_TASK_ALWAYS_EAGER
    records = [job_record(), *series(start=at("2026-11-03T09:15:00Z"), minutes=90, sm_util=40.0)]
    body = batch_body(records)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ingest_token}"}

    response = client.post("/api/v1/ingest/", data=body, content_type="application/json", **auth)
    assert response.status_code == 202
    wait_until(lambda: IngestBatch.objects.filter(processed_at__isnull=False).exists())

    assert Sample.objects.count() == 90
    assert list(JobGpuHour.objects.order_by("hour").values_list("samples", flat=True)) == [45, 45]
    assert GpuHour.objects.count() == 2

    again = client.post("/api/v1/ingest/", data=body, content_type="application/json", **auth)
    assert again.status_code == 202 and again.json()["duplicate"] is True
    time.sleep(2)  # give a wrongly enqueued second run the chance to show itself
    assert (IngestBatch.objects.count(), Sample.objects.count()) == (1, 90)
    assert sum(JobGpuHour.objects.values_list("samples", flat=True)) == 90


def worker_backends() -> set[tuple[int, object]]:
    """(pid, start) of the worker's sessions on the test database."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, backend_start FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            [WORKER_APP],
        )
        return set(cursor.fetchall())


def test_the_worker_keeps_its_database_session_from_one_batch_to_the_next(client, ingest_token, worker):
    """Celery closes Django's connections around every task unless told otherwise; a new PostgreSQL backend
    per batch cost more CPU than the batch's samples. CONN_MAX_AGE decides now, as it does for requests."""
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ingest_token}"}
    sessions = []
    for n, start in enumerate(("2026-11-03T09:00:00Z", "2026-11-03T10:00:00Z", "2026-11-03T11:00:00Z"), start=1):
        body = batch_body([job_record(), *series(start=at(start), minutes=10)])
        assert client.post("/api/v1/ingest/", data=body, content_type="application/json", **auth).status_code == 202
        wait_until(lambda n=n: IngestBatch.objects.filter(processed_at__isnull=False).count() == n)
        sessions.append(worker_backends())

    assert Sample.objects.count() == 30
    assert len(sessions[0]) == 1  # the worker's session outlives the task that opened it
    assert sessions[0] == sessions[1] == sessions[2]
