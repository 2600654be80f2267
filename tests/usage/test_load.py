"""Many collectors posting at once over loopback: every batch is stored and counted exactly once."""

import json
import os
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum

from governance.costs.selectors import reconcile
from governance.lib.months import Month
from governance.usage.models import GpuHour, IngestBatch, JobGpuHour, Sample
from tests.factories import at, iso, job_record, rate, sample_record

COLLECTORS, BATCHES, SAMPLES = 20, 10, 30

pytestmark = [
    pytest.mark.load,
    pytest.mark.skipif(not os.environ.get("DATABASE_URL"), reason="concurrent writers need PostgreSQL"),
    pytest.mark.django_db(transaction=True),
]


def post(url: str, token: str, body: bytes) -> int:
    request = urllib.request.Request(  # noqa: S310 - the live test server on loopback
        url, data=body, method="POST", headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return response.status


def collector_batches(n: int) -> list[bytes]:
    """Collector n owns one GPU and one job; its batches cover consecutive, disjoint minutes."""
    start = at("2026-11-03T00:00:00Z")
    bodies = []
    for b in range(BATCHES):
        records = [
            sample_record(gpu_uuid=f"GPU-load-{n:02d}", node=f"node-{n:02d}", job_id=f"load-{n}",
                          ts=iso(start + timedelta(minutes=b * SAMPLES + i)), sm_util=float(i % 100))
            for i in range(SAMPLES)
        ]  # fmt: skip
        if b == 0:
            end = iso(start + timedelta(minutes=BATCHES * SAMPLES))
            job = job_record(job_id=f"load-{n}", submit_time=iso(start), start_time=iso(start), end_time=end)
            records.insert(0, {**job, "state": "completed"})
        bodies.append(json.dumps({"batch_id": str(uuid.uuid4()), "collector": f"c{n}", "records": records}).encode())
    return bodies


def test_twenty_collectors_posting_at_once_lose_and_double_nothing(live_server, ingest_token):
    rate(price="2.00")
    url = f"{live_server.url}/api/v1/ingest/"

    def run(n: int) -> list[int]:
        bodies = collector_batches(n)
        statuses = [post(url, ingest_token, body) for body in bodies]
        statuses.append(post(url, ingest_token, bodies[-1]))  # a retry after a lost reply
        return statuses

    with ThreadPoolExecutor(max_workers=COLLECTORS) as pool:
        statuses = [s for result in pool.map(run, range(COLLECTORS)) for s in result]

    assert statuses == [202] * (COLLECTORS * (BATCHES + 1))
    assert IngestBatch.objects.count() == COLLECTORS * BATCHES
    assert not IngestBatch.objects.filter(processed_at__isnull=True).exists()
    assert set(IngestBatch.objects.values_list("attempts", flat=True)) == {1}
    total = COLLECTORS * BATCHES * SAMPLES
    assert Sample.objects.count() == total
    assert sum(GpuHour.objects.values_list("samples", flat=True)) == total
    per_job = JobGpuHour.objects.order_by().values_list("job__external_id").annotate(n=Sum("samples"))
    assert dict(per_job) == {f"load-{n}": BATCHES * SAMPLES for n in range(COLLECTORS)}
    # The month the load landed in adds up: team charges + unallocated = capacity x rate, to the cent.
    check = reconcile(month=Month(2026, 11))
    assert check.ok, check.problems
    assert [c.charged for c in check.clusters] == [Decimal(COLLECTORS * 5 * 2)]  # 20 GPUs x 5 h x 2.00


def test_batches_of_one_cluster_processed_side_by_side_neither_deadlock_nor_double(monkeypatch):
    """Ingest workers share a cluster's jobs, nodes, GPUs and rollup hours: each batch lands once, first time."""
    from django.db import connection

    from governance.usage import services

    monkeypatch.setattr(services, "_enqueue", lambda pk: None)  # the test's threads are the workers
    start, gpus, steps, batches = at("2026-11-03T00:00:00Z"), 16, 30, 16
    pks = []
    for b in range(batches):
        records = [
            sample_record(gpu_uuid=f"GPU-shared-{g}", node=f"node-{g % 8}", job_id=f"shared-{g % 2}",
                          ts=iso(start + timedelta(seconds=(b * steps + t) * 10)))
            for t in range(steps) for g in range(gpus)
        ]  # fmt: skip
        if b % 2:  # every other batch also describes the jobs (locks them), as a collector's scrape does
            records += [job_record(job_id=f"shared-{j}", submit_time=iso(start), start_time=iso(start),
                                   labels={"batch": str(b)}, gpu_model=None) for j in range(2)]  # fmt: skip
        body = {"batch_id": str(uuid.uuid4()), "collector": "shared", "records": records}
        receipt = services.usage_batch_receive(body=json.dumps(body).encode())
        pks.append(IngestBatch.objects.get(batch_id=receipt.batch_id).pk)

    def work(pk: int) -> None:
        try:
            services.usage_batch_process(inbox_pk=pk)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(work, pks))

    assert set(IngestBatch.objects.values_list("attempts", "last_error")) == {(1, "")}
    assert Sample.objects.count() == batches * steps * gpus
    assert sum(GpuHour.objects.values_list("samples", flat=True)) == batches * steps * gpus
    per_job = JobGpuHour.objects.order_by().values_list("job__external_id").annotate(n=Sum("samples"))
    assert dict(per_job) == {"shared-0": batches * steps * gpus // 2, "shared-1": batches * steps * gpus // 2}


def test_batches_resending_each_others_readings_side_by_side_store_and_count_each_reading_once(monkeypatch):
    """Each batch re-sends half of the previous one's readings: workers meet on the same (GPU, time) keys, the plain
    insert of one waits for the other's and falls back to ON CONFLICT; every reading lands once, every batch once."""
    from django.db import connection

    from governance.usage import services

    monkeypatch.setattr(services, "_enqueue", lambda pk: None)  # the test's threads are the workers
    start, gpus, steps, batches = at("2026-11-03T00:00:00Z"), 8, 40, 12
    pks = []
    for b in range(batches):
        records = [
            sample_record(gpu_uuid=f"GPU-again-{g}", node=f"node-{g % 2}", job_id=f"again-{g % 2}",
                          ts=iso(start + timedelta(seconds=(b * steps // 2 + t) * 10)))
            for t in range(steps) for g in range(gpus)
        ]  # fmt: skip
        body = {"batch_id": str(uuid.uuid4()), "collector": "again", "records": records}
        receipt = services.usage_batch_receive(body=json.dumps(body).encode())
        pks.append(IngestBatch.objects.get(batch_id=receipt.batch_id).pk)

    def work(pk: int) -> None:
        try:
            services.usage_batch_process(inbox_pk=pk)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(work, pks))

    readings = (batches + 1) * steps // 2 * gpus
    assert set(IngestBatch.objects.values_list("attempts", "last_error")) == {(1, "")}
    assert IngestBatch.objects.filter(processed_at__isnull=True).count() == 0
    assert Sample.objects.count() == readings
    assert sum(GpuHour.objects.values_list("samples", flat=True)) == readings
    assert sum(JobGpuHour.objects.values_list("samples", flat=True)) == readings
