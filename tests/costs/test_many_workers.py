"""Two ingest and two pricing worker processes (real Celery workers on Redis, PostgreSQL) write the same ledger as
one pricer would: no deadlock, no batch given up, no job-day priced twice."""

import os
import signal
import subprocess
import sys
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.db.models import Count

from governance.celery import app as celery_app
from governance.costs.models import Charge
from governance.costs.settle import month_reprice
from governance.lib.months import Month
from governance.usage.models import IngestBatch, PricingMark
from tests.costs.conftest import declare, set_rate
from tests.factories import H100, at, batch_body, iso, job_record, sample_record
from tests.invariants import assert_billing_invariants
from tests.usage.test_worker import BROKER, ROOT, _test_database_url, wait_until

pytestmark = [
    pytest.mark.worker,
    pytest.mark.skipif(not BROKER, reason="needs CELERY_BROKER_URL (a real Redis or RabbitMQ)"),
    pytest.mark.skipif(not os.environ.get("DATABASE_URL"), reason="needs DATABASE_URL (PostgreSQL)"),
    pytest.mark.django_db(transaction=True),
]

NOV = Month(2026, 11)
JOBS, GPUS_PER_JOB, SLICES = 4, 2, 8
START = at("2026-11-03T20:00:00Z")  # the samples run across midnight: two days for every job
STEP = timedelta(minutes=20)
END = START + SLICES * 3 * STEP


def _batches() -> list[bytes]:
    """Time slices of the whole cluster: every batch touches every job, so the workers meet on the same jobs and
    cluster-days. Each job's record comes again in every batch (as collectors repeat it)."""
    out = []
    for s in range(SLICES):
        records = []
        for j in range(JOBS):
            records.append(job_record(job_id=str(j), gpus=GPUS_PER_JOB, start_time=iso(START), submit_time=iso(START),
                                      end_time=iso(END), state="completed"))  # fmt: skip
            for g in range(GPUS_PER_JOB):
                for k in range(3):  # an hour of the slice, a sample every 20 minutes
                    ts = START + (s * 3 + k) * STEP
                    records.append(sample_record(job_id=str(j), gpu_uuid=f"GPU-{j}-{g}", gpu_index=g,
                                                 node=f"node-{j}", ts=iso(ts), sm_util=10.0 * (j + 1)))  # fmt: skip
        out.append(batch_body(records))
    return out


@pytest.fixture
def workers(tmp_path):
    """One `celery worker` per queue, each with two processes (prefork): two ingest and two pricing workers."""
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "CELERY_BROKER_URL": BROKER}
    started = []
    for queue in ("ingest", "analysis"):
        pidfile = tmp_path / f"{queue}.pid"
        log = (tmp_path / f"{queue}.log").open("w")
        command = [
            sys.executable, "-m", "celery", "-A", "governance", "worker", "-Q", queue, "-n", f"{queue}@test",
            "--pool", "prefork", "--concurrency", "2", "--prefetch-multiplier", "1", "--pidfile", str(pidfile),
            "--loglevel", "INFO", "--without-heartbeat", "--without-gossip", "--without-mingle",
        ]  # fmt: skip
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        started.append((process, pidfile, log))
    celery_app.conf.task_always_eager = False
    try:
        yield [Path(log.name) for _, _, log in started]
    finally:
        for process, pidfile, _ in started:
            if pidfile.exists():
                os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
            else:
                process.terminate()
        for process, _, log in started:
            process.wait(timeout=60)
            log.close()


def _ledger() -> list[tuple]:
    rows = Charge.objects.filter(month=NOV.start.date()).values_list(
        "kind", "job_ref", "day", "team_name", "gpu_model", "gpu_hours", "cost", "idle_cost"
    )
    return sorted(rows, key=repr)


def test_two_ingest_and_two_pricing_workers_write_the_ledger_one_pricer_would(client, cast, ingest_token, workers):
    set_rate(H100, "2.00")
    declare(JOBS * GPUS_PER_JOB, since="2026-11-01")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ingest_token}"}

    for body in _batches():
        assert client.post("/api/v1/ingest/", data=body, content_type="application/json", **auth).status_code == 202

    def drained() -> bool:
        done = IngestBatch.objects.filter(processed_at__isnull=False).count() == SLICES
        # Every job's two days priced, and no mark left.
        return done and not PricingMark.objects.exists() and Charge.objects.filter(kind="usage").count() == JOBS * 2

    wait_until(drained, timeout=120)
    by_workers = _ledger()
    logs = "".join(path.read_text() for path in workers)

    assert not IngestBatch.objects.filter(dead_at__isnull=False).exists()
    assert "deadlock detected" not in logs
    twice = Charge.objects.filter(kind="usage").values("job_id", "day", "gpu_model", "mig_profile")
    assert not twice.annotate(n=Count("id")).filter(n__gt=1).exists()
    # The same month priced again by one pricer, in this process: nothing changes.
    month_reprice(month=NOV)
    assert _ledger() == by_workers
    usage = Charge.objects.filter(kind="usage")
    assert sum((c.gpu_hours for c in usage), Decimal(0)) > 0
    assert_billing_invariants()
