"""The prepared inbox format: a batch parsed once on the web side, written by the worker without parsing it."""

import hashlib
import os
import struct

import pytest
from django.db import connection, transaction

from collectors.records import decode_batch
from governance.fleet.models import Gpu
from governance.usage import prepared, writer
from governance.usage.models import GpuHour, IngestBatch, Job, JobGpuHour, Sample
from governance.usage.services import usage_batch_process, usage_batch_receive
from tests.factories import H100, at, batch_body, ingest, job_record, sample_record, series

postgres_only = pytest.mark.skipif(not os.environ.get("DATABASE_URL"), reason="the prepared inbox is PostgreSQL's")
PGCOPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"


def test_prepare_keeps_each_gpus_latest_facts_and_first_sighting():
    body = batch_body([
        sample_record(ts="2026-11-03T09:20:00Z", node="gpu-018", gpu_index=3, mig_profile="3g.40gb"),
        sample_record(ts="2026-11-03T09:10:00Z", node="gpu-017", gpu_index=0),  # older, and out of order
        sample_record(ts="2026-11-03T09:15:00Z", job_id=None, job_cpu_numa_nodes=None),
        sample_record(ts="2026-11-03T09:15:00Z", gpu_uuid="GPU-2", job_id="77", job_cpu_numa_nodes=[0, 2]),
        job_record(),
    ])  # fmt: skip

    batch = prepared.prepare(decode_batch(body))

    first, second = batch.header.gpus
    assert (first.uuid, first.node, first.index, first.mig_profile) == ("GPU-0000-0001", "gpu-018", 3, "3g.40gb")
    assert (first.first_seen, first.last_seen) == (at("2026-11-03T09:10:00Z"), at("2026-11-03T09:20:00Z"))
    assert (second.uuid, second.mig_profile) == ("GPU-2", "")
    assert batch.header.job_keys == [("c1", "4242", H100), ("c1", "77", H100)]
    assert [j.job_id for j in batch.header.jobs] == ["4242"] and batch.header.samples == 4
    # Each row names its GPU and job by 1-based header position; the CPU NUMA nodes become a bit mask.
    assert [(r[1], r[2], r[8]) for r in batch.rows] == [(1, 1, 0b1), (1, 1, 0b1), (1, None, None), (2, 2, 0b101)]


@postgres_only
@pytest.mark.django_db
def test_a_prepared_payload_decodes_to_the_same_header_and_binary_copy_rows():
    batch = prepared.prepare(
        decode_batch(batch_body([job_record(), *series(start=at("2026-11-03T09:00:00Z"), minutes=3)]))
    )
    connection.ensure_connection()

    payload = prepared.encode(batch, connection.connection)
    again = prepared.decode(payload)

    assert again.header == batch.header
    rows = bytes(again.rows)
    assert rows.startswith(PGCOPY_SIGNATURE) and rows.endswith(b"\xff\xff")
    # Three rows of len(STAGE_COLUMNS) fields each: every row starts with its field count.
    assert rows.count(struct.pack(">h", len(prepared.STAGE_COLUMNS))) >= 3


@postgres_only
@pytest.mark.django_db
def test_the_fast_row_encoding_writes_the_bytes_psycopgs_copy_writes():
    """`encode` formats rows with psycopg's row formatter directly; psycopg's public `Copy` must write the same bytes
    for every kind of row: nulls in each reading, a job and none, CPU NUMA masks, MIG slices, odd times."""
    readings = ("sm_util", "mem_used_mib", "power_w", "gpu_numa_node", "tensor_active", "pcie_rx_mibps", "io_wait")
    records = [
        *series(start=at("2026-11-03T09:00:00.123456Z"), minutes=5, sm_util=lambda s: s / 7, job_cpu_numa_nodes=[0, 3]),
        *(sample_record(ts=f"2026-11-03T10:0{i}:00Z", gpu_uuid=f"GPU-{i}", **{name: None}) for i, name in
          enumerate(readings)),
        sample_record(ts="2026-11-03T11:00:00Z", job_id=None, job_cpu_numa_nodes=None, mig_profile="1g.10gb"),
        sample_record(ts="2026-11-03T11:00:00Z", gpu_uuid="GPU-9", job_id="9", host_cpu_util=100.0, io_wait=0.0),
        job_record(),
    ]  # fmt: skip
    batch = prepared.prepare(decode_batch(batch_body(records)))
    connection.ensure_connection()

    fast = prepared.encode(batch, connection.connection)

    assert prepared._format_row_binary is not None  # the fast path is there in the psycopg this project installs
    assert fast == prepared.encode(batch, connection.connection, public_path=True)
    assert bytes(prepared.decode(fast).rows).count(struct.pack(">h", len(prepared.STAGE_COLUMNS))) >= len(records) - 1


@pytest.mark.parametrize(
    "payload",
    [b'{"batch_id": "x"}', prepared.MAGIC + struct.pack(">I", 3) + b"\xc1\xc1\xc1", prepared.MAGIC[:2]],
    ids=["json", "bad-header", "truncated"],
)
def test_a_payload_that_is_not_a_prepared_batch_is_refused(payload):
    with pytest.raises(prepared.PreparedInvalid):
        prepared.decode(payload)


@pytest.mark.django_db
def test_the_inbox_stores_postgres_batches_prepared_and_sqlite_batches_as_received():
    body = batch_body([job_record(), sample_record()])
    receipt = usage_batch_receive(body=body)

    inbox = IngestBatch.objects.get(batch_id=receipt.batch_id)
    assert inbox.body_sha256 == hashlib.sha256(body).hexdigest()
    if connection.vendor == "postgresql":
        assert inbox.format == IngestBatch.Format.PREPARED
        assert prepared.decode(bytes(inbox.body)).header.samples == 1
    else:
        assert (inbox.format, bytes(inbox.body)) == (IngestBatch.Format.JSON, body)


def _store_as_json(body: bytes) -> int:
    """An inbox row as batches were stored before the prepared format (and are on SQLite)."""
    batch = decode_batch(body)
    with transaction.atomic():
        return writer.inbox_insert(
            batch_id=batch.batch_id, collector=batch.collector, source=IngestBatch.Source.IMPORT,
            format=IngestBatch.Format.JSON, body=body,
            body_sha256=hashlib.sha256(body).hexdigest(), record_count=len(batch.records),
        )  # fmt: skip


def _cluster_state(cluster: str) -> dict[str, list]:
    gpus = Gpu.objects.filter(cluster__name=cluster)
    return {
        "gpus": list(gpus.order_by("uuid").values_list("uuid", "node__name", "index", "model", "numa_node",
                                                       "mig_profile", "first_seen_at", "last_seen_at")),
        "jobs": list(Job.objects.filter(cluster__name=cluster).order_by("external_id").values_list(
            "external_id", "user_name", "gpus", "gpu_model", "start_time", "end_time", "state", "described")),
        "samples": sorted(Sample.objects.filter(gpu__in=gpus).values_list(
            "ts", "gpu__uuid", "job__external_id", "sm_util", "mem_used_mib", "power_w", "cpu_numa_mask", "io_wait")),
        "job_hours": sorted(JobGpuHour.objects.filter(gpu__in=gpus).values_list(
            "job__external_id", "gpu__uuid", "hour", "samples", "idle_samples", "sm_sum", "sm_max", "sm_sq_sum",
            "mem_used_max", "power_sum", "power_samples", "numa_mismatch_samples", "io_wait_sum", "io_wait_samples")),
        "gpu_hours": sorted(GpuHour.objects.filter(gpu__in=gpus).values_list(
            "gpu__uuid", "hour", "samples", "allocated_samples", "idle_samples", "sm_sum", "mem_used_max",
            "power_sum", "power_samples")),
    }  # fmt: skip


def _records(cluster: str) -> list[dict]:
    start = at("2026-11-03T09:40:00Z")
    return [
        job_record(cluster=cluster, gpus=2),
        job_record(cluster=cluster, job_id="4243", gpu_model=None, end_time="2026-11-03T10:30:00Z",
                   state="completed"),
        *series(start=start, minutes=40, cluster=cluster, sm_util=lambda s: float(s % 100), io_wait=5.0),
        *series(start=start, minutes=40, cluster=cluster, gpu_uuid="GPU-2", gpu_numa_node=1, job_id="4243",
                job_cpu_numa_nodes=[0], power_w=None),
        *series(start=start, minutes=20, cluster=cluster, gpu_uuid="GPU-3", job_id=None, job_cpu_numa_nodes=None,
                sm_util=0.0),
    ]  # fmt: skip


@postgres_only
@pytest.mark.django_db
def test_a_batch_stored_as_json_and_one_stored_prepared_land_the_same():
    ingest(_records("prepared"))
    usage_batch_process(inbox_pk=_store_as_json(batch_body(_records("json"))))

    as_prepared, as_json = _cluster_state("prepared"), _cluster_state("json")
    assert as_prepared["samples"] and as_prepared["job_hours"] and as_prepared["gpu_hours"]
    assert as_prepared == as_json
    # The completed job named no model: it took its GPUs'.
    assert Job.objects.get(cluster__name="prepared", external_id="4243").gpu_model == "NVIDIA H100 80GB HBM3"


@pytest.mark.django_db
def test_one_batch_may_carry_several_clusters():
    ingest([*series(start=at("2026-11-03T09:00:00Z"), minutes=5, cluster="east"),
            *series(start=at("2026-11-03T09:00:00Z"), minutes=5, cluster="west", job_id="9")])  # fmt: skip

    per_cluster = {
        name: (Sample.objects.filter(gpu__cluster__name=name).count(), Job.objects.get(cluster__name=name).external_id)
        for name in ("east", "west")
    }
    assert per_cluster == {"east": (5, "4242"), "west": (5, "9")}
    assert sorted(GpuHour.objects.values_list("gpu__cluster__name", "samples")) == [("east", 5), ("west", 5)]
