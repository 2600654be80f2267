"""Writes decoded records: jobs and GPUs by upsert, samples through a staging table, rollups in SQL.

Samples go into a temporary staging table (PostgreSQL: binary COPY; SQLite: executemany), then
into the sample table and both hourly rollups with one set-based statement each.
"""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime

import psycopg
from django.conf import settings
from django.db import IntegrityError, connection
from django.utils import timezone

from collectors.records import TERMINAL_STATES, JobRecord, SampleRecord
from governance.fleet.models import Cluster, Node
from governance.org.services import project_resolve
from governance.usage.models import IngestBatch, Job

STAGE_COLUMNS = (
    "ts", "gpu_id", "job_id", "sm_util", "mem_used_mib", "mem_total_mib", "power_w", "gpu_numa_node",
    "cpu_numa_mask", "mem_util", "tensor_active", "dram_active", "pcie_rx_mibps", "pcie_tx_mibps",
    "nvlink_mibps", "host_cpu_util", "io_wait",
)  # fmt: skip
STAGE_TYPES = (
    "timestamptz", "int8", "int8", "float8", "float8", "float8", "float8", "int2",
    "int8", "float8", "float8", "float8", "float8", "float8", "float8", "float8", "float8",
)  # fmt: skip
STAGE = "usage_sample_stage"


# Django's PostgreSQL cursors bind parameters client-side, which writes a batch body into the SQL text
# as hex (twice its size, parsed again by the server). A plain psycopg cursor on the same connection and
# transaction sends and reads it as binary: an inbox write then costs what its bytes cost.
INBOX_INSERT = """
INSERT INTO usage_ingestbatch (batch_id, collector, body, body_sha256, record_count, received_at, attempts, last_error)
VALUES (%s, %s, %s, %s, %s, %s, 0, '') RETURNING id
"""


def inbox_insert(*, batch_id: uuid.UUID, collector: str, body: bytes, body_sha256: str, record_count: int) -> int:
    """Store a batch in the inbox within the current transaction; raises IntegrityError on a known batch id."""
    if connection.vendor != "postgresql":
        return IngestBatch.objects.create(
            batch_id=batch_id, collector=collector, body=body, body_sha256=body_sha256, record_count=record_count
        ).pk
    connection.ensure_connection()
    try:
        with psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(INBOX_INSERT, [batch_id, collector, body, body_sha256, record_count, timezone.now()])
            return cursor.fetchone()[0]
    except psycopg.IntegrityError as exc:
        raise IntegrityError(str(exc)) from exc


def commit_without_flush() -> None:
    """Let this transaction commit without waiting for its WAL flush (PostgreSQL).

    Safe for processing a batch, never for storing one: if the server crashes before the flush, the
    samples, rollups and processed_at vanish together and the sweep processes the inbox row again.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


def inbox_body(inbox_pk: int) -> bytes:
    if connection.vendor != "postgresql":
        return bytes(IngestBatch.objects.filter(pk=inbox_pk).values_list("body", flat=True).get())
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute("SELECT body FROM usage_ingestbatch WHERE id = %s", [inbox_pk], binary=True)
        return cursor.fetchone()[0]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector while a batch's records are alive.

    Decoding a batch allocates tens of thousands of tracked objects, each allocation burst triggering
    collections that walk the whole heap of a long-lived web or worker process (about half of what
    decoding costs there). The records form no reference cycles; reference counting frees them.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def numa_mask(nodes: Sequence[int] | None) -> int | None:
    if nodes is None:
        return None
    mask = 0
    for node in nodes:
        mask |= 1 << node
    return mask


def clusters_ensure(names: Iterable[str]) -> dict[str, int]:
    names = set(names)
    known = dict(Cluster.objects.filter(name__in=names).values_list("name", "id"))
    if len(known) < len(names):  # only a new cluster costs a write
        Cluster.objects.bulk_create([Cluster(name=n) for n in names - known.keys()], ignore_conflicts=True)
        known = dict(Cluster.objects.filter(name__in=names).values_list("name", "id"))
    return known


def nodes_ensure(keys: set[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """(cluster id, node name) -> node id, creating the nodes not seen before; marks them all seen now."""

    def known() -> dict[tuple[int, str], int]:
        rows = Node.objects.filter(cluster_id__in={c for c, _ in keys}, name__in={n for _, n in keys})
        return {(c, n): pk for pk, c, n in rows.values_list("id", "cluster_id", "name") if (c, n) in keys}

    ids = known()
    if len(ids) < len(keys):
        Node.objects.bulk_create([Node(cluster_id=c, name=n) for c, n in keys - ids.keys()], ignore_conflicts=True)
        ids = known()
    Node.objects.filter(pk__in=ids.values()).update(last_seen_at=timezone.now())
    return ids


GPU_UPSERT = """
INSERT INTO fleet_gpu (cluster_id, uuid, node_id, "index", model, memory_total_mib, numa_node, mig_profile,
    first_seen_at, last_seen_at)
VALUES {values}
ON CONFLICT (cluster_id, uuid) DO UPDATE SET
    node_id = CASE WHEN {newer} THEN excluded.node_id ELSE fleet_gpu.node_id END,
    "index" = CASE WHEN {newer} THEN excluded."index" ELSE fleet_gpu."index" END,
    model = CASE WHEN {newer} THEN excluded.model ELSE fleet_gpu.model END,
    memory_total_mib = CASE WHEN {newer} THEN excluded.memory_total_mib ELSE fleet_gpu.memory_total_mib END,
    numa_node = CASE WHEN {newer} THEN excluded.numa_node ELSE fleet_gpu.numa_node END,
    mig_profile = CASE WHEN {newer} THEN excluded.mig_profile ELSE fleet_gpu.mig_profile END,
    first_seen_at = {least}(fleet_gpu.first_seen_at, excluded.first_seen_at),
    last_seen_at = {greatest}(fleet_gpu.last_seen_at, excluded.last_seen_at)
RETURNING id, cluster_id, uuid
"""


def gpus_ensure(samples: Sequence[SampleRecord], cluster_ids: dict[str, int]) -> dict[tuple[int, str], int]:
    """Upsert the nodes and GPUs the samples name (the latest sample's facts win); (cluster id, uuid) -> GPU id.

    One statement for all GPUs of the batch: this runs once per batch on the ingest hot path.
    """
    by_name: dict[tuple[str, str], SampleRecord] = {}
    first_by_name: dict[tuple[str, str], datetime] = {}
    for s in samples:  # once per sample: keep it lean
        key = (s.cluster, s.gpu_uuid)
        seen = by_name.get(key)
        if seen is None:
            by_name[key] = s
            first_by_name[key] = s.ts
        elif s.ts > seen.ts:
            by_name[key] = s
        elif s.ts < first_by_name[key]:
            first_by_name[key] = s.ts
    latest = {(cluster_ids[c], u): s for (c, u), s in by_name.items()}
    first = {(cluster_ids[c], u): ts for (c, u), ts in first_by_name.items()}
    node_ids = nodes_ensure({(cid, s.node) for (cid, _), s in latest.items()})
    adapt = connection.ops.adapt_datetimefield_value
    params: list[object] = []
    for (cid, gpu_uuid), s in sorted(latest.items()):  # a fixed order: two workers never deadlock on GPU rows
        params += [cid, gpu_uuid, node_ids[(cid, s.node)], s.gpu_index, s.gpu_model, s.mem_total_mib, s.gpu_numa_node]
        params += [s.mig_profile or "", adapt(first[(cid, gpu_uuid)]), adapt(s.ts)]
    postgres = connection.vendor == "postgresql"
    sql = GPU_UPSERT.format(
        values=", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(latest)),
        newer="excluded.last_seen_at >= fleet_gpu.last_seen_at",
        least="LEAST" if postgres else "min",
        greatest="GREATEST" if postgres else "max",
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {(c, u): pk for pk, c, u in cursor.fetchall()}


def _merge_job(job: Job, rec: JobRecord, project_id: int | None) -> None:
    job.user_name = rec.user
    job.account = rec.project
    job.team_name = rec.team or job.team_name
    job.project_id = project_id or job.project_id
    job.gpus = rec.gpus
    job.gpu_model = rec.gpu_model or job.gpu_model
    job.submit_time = rec.submit_time
    job.start_time = rec.start_time or job.start_time
    # A replayed older record never reopens a job that has ended.
    if job.end_time is None or rec.end_time is not None:
        job.end_time = rec.end_time or job.end_time
        if job.state not in TERMINAL_STATES or rec.state in TERMINAL_STATES:
            job.state = rec.state
    job.labels = {**job.labels, **rec.labels}
    job.described = True


JOB_FIELDS = [
    "user_name", "account", "team_name", "project_id", "gpus", "gpu_model", "submit_time", "start_time",
    "end_time", "state", "labels", "described",
]  # fmt: skip


def _job_values(job: Job) -> tuple:
    return tuple(getattr(job, field) for field in JOB_FIELDS)


def jobs_upsert(records: Sequence[JobRecord], cluster_ids: dict[str, int]) -> list[int]:
    """Create or update jobs from job records (later facts win; an end time is never erased)."""
    if not records:
        return []
    keys = {(cluster_ids[r.cluster], r.job_id) for r in records}
    Job.objects.bulk_create([Job(cluster_id=c, external_id=e) for c, e in keys], ignore_conflicts=True)
    jobs = {
        (j.cluster_id, j.external_id): j
        for j in Job.objects.select_for_update()
        .filter(cluster_id__in={c for c, _ in keys}, external_id__in={e for _, e in keys})
        .order_by("pk")
    }
    before = {key: _job_values(job) for key, job in jobs.items()}
    projects: dict[tuple[str, str | None, str], int | None] = {}
    for rec in records:
        key = (rec.project, rec.team, rec.cluster)
        if key not in projects:
            project = project_resolve(account=rec.project, team=rec.team, cluster=rec.cluster)
            projects[key] = project.pk if project else None
        _merge_job(jobs[(cluster_ids[rec.cluster], rec.job_id)], rec, projects[key])
    # A collector repeats a running job's record every scrape; rewriting unchanged rows is most of the cost.
    changed = [jobs[k] for k in keys if _job_values(jobs[k]) != before[k]]
    if changed:
        Job.objects.bulk_update(changed, JOB_FIELDS)
    return [jobs[k].pk for k in keys]


def job_ids_ensure(samples: Sequence[SampleRecord], cluster_ids: dict[str, int]) -> dict[tuple[int, str], int]:
    keys = {(cluster_ids[s.cluster], s.job_id) for s in samples if s.job_id is not None}
    if not keys:
        return {}

    def known() -> dict[tuple[int, str], int]:
        rows = Job.objects.filter(cluster_id__in={c for c, _ in keys}, external_id__in={e for _, e in keys})
        return {(c, e): pk for pk, c, e in rows.values_list("id", "cluster_id", "external_id") if (c, e) in keys}

    ids = known()
    if len(ids) < len(keys):  # samples of a job whose record has not come yet
        Job.objects.bulk_create([Job(cluster_id=c, external_id=e) for c, e in keys - ids.keys()], ignore_conflicts=True)
        ids = known()
    return ids


def _rows(samples, cluster_ids, gpu_ids, job_ids):
    for s in samples:
        cid = cluster_ids[s.cluster]
        yield (
            s.ts, gpu_ids[(cid, s.gpu_uuid)], job_ids[(cid, s.job_id)] if s.job_id is not None else None,
            s.sm_util, s.mem_used_mib, s.mem_total_mib, s.power_w, s.gpu_numa_node,
            numa_mask(s.job_cpu_numa_nodes), s.mem_util, s.tensor_active, s.dram_active, s.pcie_rx_mibps,
            s.pcie_tx_mibps, s.nvlink_mibps, s.host_cpu_util, s.io_wait,
        )  # fmt: skip


def _stage(rows: Iterable[tuple]) -> None:
    cols = ", ".join(STAGE_COLUMNS)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            typed = ", ".join(f"{c} {t}" for c, t in zip(STAGE_COLUMNS, STAGE_TYPES, strict=True))
            cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {STAGE} ({typed}) ON COMMIT DELETE ROWS")
            cursor.execute(f"TRUNCATE {STAGE}")  # two batches may share one transaction
            with cursor.cursor.copy(f"COPY {STAGE} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(STAGE_TYPES)
                for row in rows:
                    copy.write_row(row)
        else:
            cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {STAGE} ({cols})")
            cursor.execute(f"DELETE FROM {STAGE}")
            marks = ", ".join(["%s"] * len(STAGE_COLUMNS))
            adapt = connection.ops.adapt_datetimefield_value
            cursor.executemany(f"INSERT INTO {STAGE} ({cols}) VALUES ({marks})", [(adapt(r[0]), *r[1:]) for r in rows])


def _sql(template: str) -> str:
    if connection.vendor == "postgresql":
        hour, greatest = "date_trunc('hour', ts)", "GREATEST"
        mismatch = "(cpu_numa_mask & (1::int8 << gpu_numa_node)) = 0"
    else:
        hour, greatest = "strftime('%%Y-%%m-%%d %%H:00:00', ts)", "max"
        mismatch = "(cpu_numa_mask & (1 << gpu_numa_node)) = 0"
    return template.format(hour=hour, greatest=greatest, mismatch=mismatch, stage=STAGE)


INSERT_SAMPLES = "INSERT INTO usage_sample ({cols}) SELECT {cols} FROM {{stage}}"

UPSERT_JOB_HOURS = """
INSERT INTO usage_jobgpuhour (job_id, gpu_id, hour, samples, idle_samples, sm_sum, sm_max, sm_sq_sum,
    mem_used_max, mem_total_mib, power_sum, power_samples, numa_mismatch_samples, io_wait_sum, io_wait_samples,
    host_cpu_sum, host_cpu_samples, tensor_sum, tensor_samples)
SELECT job_id, gpu_id, {hour}, count(*), count(*) FILTER (WHERE sm_util < %(idle)s), sum(sm_util), max(sm_util),
    sum(sm_util * sm_util), max(mem_used_mib), max(mem_total_mib), coalesce(sum(power_w), 0), count(power_w),
    count(*) FILTER (WHERE {mismatch}), coalesce(sum(io_wait), 0), count(io_wait),
    coalesce(sum(host_cpu_util), 0), count(host_cpu_util), coalesce(sum(tensor_active), 0), count(tensor_active)
FROM {stage} WHERE job_id IS NOT NULL GROUP BY job_id, gpu_id, {hour}
ON CONFLICT (job_id, gpu_id, hour) DO UPDATE SET
    samples = usage_jobgpuhour.samples + excluded.samples,
    idle_samples = usage_jobgpuhour.idle_samples + excluded.idle_samples,
    sm_sum = usage_jobgpuhour.sm_sum + excluded.sm_sum,
    sm_max = {greatest}(usage_jobgpuhour.sm_max, excluded.sm_max),
    sm_sq_sum = usage_jobgpuhour.sm_sq_sum + excluded.sm_sq_sum,
    mem_used_max = {greatest}(usage_jobgpuhour.mem_used_max, excluded.mem_used_max),
    mem_total_mib = {greatest}(usage_jobgpuhour.mem_total_mib, excluded.mem_total_mib),
    power_sum = usage_jobgpuhour.power_sum + excluded.power_sum,
    power_samples = usage_jobgpuhour.power_samples + excluded.power_samples,
    numa_mismatch_samples = usage_jobgpuhour.numa_mismatch_samples + excluded.numa_mismatch_samples,
    io_wait_sum = usage_jobgpuhour.io_wait_sum + excluded.io_wait_sum,
    io_wait_samples = usage_jobgpuhour.io_wait_samples + excluded.io_wait_samples,
    host_cpu_sum = usage_jobgpuhour.host_cpu_sum + excluded.host_cpu_sum,
    host_cpu_samples = usage_jobgpuhour.host_cpu_samples + excluded.host_cpu_samples,
    tensor_sum = usage_jobgpuhour.tensor_sum + excluded.tensor_sum,
    tensor_samples = usage_jobgpuhour.tensor_samples + excluded.tensor_samples
"""

UPSERT_GPU_HOURS = """
INSERT INTO usage_gpuhour (gpu_id, hour, samples, allocated_samples, idle_samples, sm_sum, mem_used_max,
    power_sum, power_samples)
SELECT gpu_id, {hour}, count(*), count(job_id), count(*) FILTER (WHERE sm_util < %(idle)s), sum(sm_util),
    max(mem_used_mib), coalesce(sum(power_w), 0), count(power_w)
FROM {stage} WHERE true GROUP BY gpu_id, {hour}
ON CONFLICT (gpu_id, hour) DO UPDATE SET
    samples = usage_gpuhour.samples + excluded.samples,
    allocated_samples = usage_gpuhour.allocated_samples + excluded.allocated_samples,
    idle_samples = usage_gpuhour.idle_samples + excluded.idle_samples,
    sm_sum = usage_gpuhour.sm_sum + excluded.sm_sum,
    mem_used_max = {greatest}(usage_gpuhour.mem_used_max, excluded.mem_used_max),
    power_sum = usage_gpuhour.power_sum + excluded.power_sum,
    power_samples = usage_gpuhour.power_samples + excluded.power_samples
"""

# Jobs whose record gave no GPU model take it from the GPUs their samples came from.
FILL_JOB_MODELS = """
UPDATE usage_job SET gpu_model = (
    SELECT g.model FROM {stage} s JOIN fleet_gpu g ON g.id = s.gpu_id WHERE s.job_id = usage_job.id LIMIT 1
) WHERE gpu_model = '' AND id IN (SELECT DISTINCT job_id FROM {stage} WHERE job_id IS NOT NULL)
"""


def samples_write(samples: Sequence[SampleRecord], cluster_ids: dict[str, int]) -> int:
    """Append the samples and fold them into the hourly rollups; returns the number written."""
    if not samples:
        return 0
    if not connection.in_atomic_block:
        raise RuntimeError("samples_write must run inside a transaction (the staging table is per transaction)")
    gpu_ids = gpus_ensure(samples, cluster_ids)
    job_ids = job_ids_ensure(samples, cluster_ids)
    _stage(_rows(samples, cluster_ids, gpu_ids, job_ids))
    params = {"idle": settings.GOVERNANCE_IDLE_SM_PERCENT}
    with connection.cursor() as cursor:
        cursor.execute(_sql(INSERT_SAMPLES.format(cols=", ".join(STAGE_COLUMNS))))
        cursor.execute(_sql(UPSERT_JOB_HOURS), params)
        cursor.execute(_sql(UPSERT_GPU_HOURS), params)
        cursor.execute(_sql(FILL_JOB_MODELS))
    return len(samples)
