"""Writes decoded records: jobs and GPUs by upsert, samples through a staging table, rollups in SQL.

Samples go into a temporary staging table (PostgreSQL: binary COPY; SQLite: executemany), then
into the sample table and both hourly rollups with one set-based statement each.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.utils import timezone

from collectors.records import TERMINAL_STATES, JobRecord, SampleRecord
from governance.fleet.models import Cluster, Gpu, Node
from governance.org.services import project_resolve
from governance.usage.models import Job

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


def numa_mask(nodes: Sequence[int] | None) -> int | None:
    if nodes is None:
        return None
    mask = 0
    for node in nodes:
        mask |= 1 << node
    return mask


def clusters_ensure(names: Iterable[str]) -> dict[str, int]:
    names = set(names)
    Cluster.objects.bulk_create([Cluster(name=n) for n in names], ignore_conflicts=True)
    return dict(Cluster.objects.filter(name__in=names).values_list("name", "id"))


def gpus_ensure(samples: Sequence[SampleRecord], cluster_ids: dict[str, int]) -> dict[tuple[int, str], int]:
    """Upsert the nodes and GPUs the samples name; returns (cluster id, uuid) -> GPU id."""
    latest: dict[tuple[int, str], SampleRecord] = {}
    first: dict[tuple[int, str], datetime] = {}
    for s in samples:
        key = (cluster_ids[s.cluster], s.gpu_uuid)
        seen = latest.get(key)
        if seen is None or s.ts > seen.ts:
            latest[key] = s
        if key not in first or s.ts < first[key]:
            first[key] = s.ts
    node_keys = {(cid, s.node) for (cid, _), s in latest.items()}
    Node.objects.bulk_create([Node(cluster_id=c, name=n) for c, n in node_keys], ignore_conflicts=True)
    node_ids = {
        (c, n): pk
        for pk, c, n in Node.objects.filter(
            cluster_id__in={c for c, _ in node_keys}, name__in={n for _, n in node_keys}
        ).values_list("id", "cluster_id", "name")
    }
    existing = {
        (g.cluster_id, g.uuid): g
        for g in Gpu.objects.filter(cluster_id__in={c for c, _ in latest}, uuid__in={u for _, u in latest})
    }
    to_create, to_update = [], []
    for key, s in latest.items():
        gpu = existing.get(key)
        fields = {
            "node_id": node_ids[(key[0], s.node)],
            "index": s.gpu_index,
            "model": s.gpu_model,
            "memory_total_mib": s.mem_total_mib,
            "numa_node": s.gpu_numa_node,
            "mig_profile": s.mig_profile or "",
        }
        if gpu is None:
            to_create.append(Gpu(cluster_id=key[0], uuid=key[1], first_seen_at=first[key], last_seen_at=s.ts, **fields))
        elif s.ts >= gpu.last_seen_at:
            for name, value in fields.items():
                setattr(gpu, name, value)
            gpu.last_seen_at = s.ts
            gpu.first_seen_at = min(gpu.first_seen_at, first[key])
            to_update.append(gpu)
        elif first[key] < gpu.first_seen_at:
            gpu.first_seen_at = first[key]
            to_update.append(gpu)
    Gpu.objects.bulk_create(to_create, ignore_conflicts=True)
    if to_update:
        Gpu.objects.bulk_update(to_update, [*fields, "last_seen_at", "first_seen_at"])
    return {
        (c, u): pk
        for pk, c, u in Gpu.objects.filter(
            cluster_id__in={c for c, _ in latest}, uuid__in={u for _, u in latest}
        ).values_list("id", "cluster_id", "uuid")
    }


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
    projects: dict[tuple[str, str | None, str], int | None] = {}
    for rec in records:
        key = (rec.project, rec.team, rec.cluster)
        if key not in projects:
            project = project_resolve(account=rec.project, team=rec.team, cluster=rec.cluster)
            projects[key] = project.pk if project else None
        _merge_job(jobs[(cluster_ids[rec.cluster], rec.job_id)], rec, projects[key])
    Job.objects.bulk_update([jobs[k] for k in keys], JOB_FIELDS)
    return [jobs[k].pk for k in keys]


def job_ids_ensure(samples: Sequence[SampleRecord], cluster_ids: dict[str, int]) -> dict[tuple[int, str], int]:
    keys = {(cluster_ids[s.cluster], s.job_id) for s in samples if s.job_id is not None}
    if not keys:
        return {}
    Job.objects.bulk_create([Job(cluster_id=c, external_id=e) for c, e in keys], ignore_conflicts=True)
    return {
        (c, e): pk
        for pk, c, e in Job.objects.filter(
            cluster_id__in={c for c, _ in keys}, external_id__in={e for _, e in keys}
        ).values_list("id", "cluster_id", "external_id")
    }


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
    Node.objects.filter(pk__in=Gpu.objects.filter(pk__in=set(gpu_ids.values())).values("node_id")).update(
        last_seen_at=timezone.now()
    )
    return len(samples)
