"""Writes prepared batches: jobs and GPUs by upsert, samples through a staging table, rollups in SQL.

Samples go into a temporary staging table (PostgreSQL: binary COPY; SQLite: executemany), then
into the sample table and both hourly rollups with one set-based statement each.
"""

from __future__ import annotations

import gc
import json
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import psycopg
from django.conf import settings
from django.db import IntegrityError, connection
from django.utils import timezone

from collectors.records import TERMINAL_STATES, JobRecord
from governance.fleet.models import Cluster, Gpu, Node
from governance.org.services import project_ids_resolver
from governance.usage import prepared
from governance.usage.marks import job_days_mark
from governance.usage.models import IngestBatch, Job
from governance.usage.prepared import GpuFacts

# usage_sample's columns as the writer fills them, and their types for a binary COPY.
SAMPLE_COLUMNS = ("ts", "gpu_id", "job_id", *prepared.READING_COLUMNS)
SAMPLE_TYPES = ("timestamptz", "int8", "int8", *prepared.READING_TYPES)
STAGE = "usage_sample_stage"


# Django's PostgreSQL cursors bind parameters client-side, which writes a batch body into the SQL text
# as hex (twice its size, parsed again by the server). A plain psycopg cursor on the same connection and
# transaction sends and reads it as binary: an inbox write then costs what its bytes cost.
INBOX_INSERT = """
INSERT INTO usage_ingestbatch (batch_id, collector, source, format, body, body_sha256, record_count, received_at,
    attempts, last_error)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 0, '') RETURNING id
"""


def inbox_insert(
    *,
    batch_id: uuid.UUID,
    collector: str,
    source: str,
    format: str,
    body: bytes,
    body_sha256: str,
    record_count: int,
) -> int:
    """Store a batch in the inbox within the current transaction; raises IntegrityError on a known batch id."""
    if connection.vendor != "postgresql":
        return IngestBatch.objects.create(
            batch_id=batch_id,
            collector=collector,
            source=source,
            format=format,
            body=body,
            body_sha256=body_sha256,
            record_count=record_count,
        ).pk
    connection.ensure_connection()
    try:
        with psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(
                INBOX_INSERT, [batch_id, collector, source, format, body, body_sha256, record_count, timezone.now()]
            )
            return cursor.fetchone()[0]
    except psycopg.IntegrityError as exc:
        raise IntegrityError(str(exc)) from exc


# Claims an unprocessed, live batch, marks it processed and returns its body, in one round trip; a rollback of the
# processing transaction undoes the mark. A row another session holds is waited for, up to the lock timeout:
# that session is most often one whose worker was killed, and its lock goes with it within a second or so. When
# it commits instead, the row no longer matches and the claim returns nothing.
INBOX_CLAIM = """
UPDATE usage_ingestbatch SET processed_at = %s, attempts = attempts + 1, last_error = ''
WHERE id = %s AND processed_at IS NULL AND dead_at IS NULL
RETURNING format, body, source
"""


def inbox_claim(inbox_pk: int) -> tuple[str, bytes, str] | None:
    """(format, body, source) of an unprocessed inbox batch, now marked processed in the current transaction;
    None when it is processed already or dead. Raises psycopg.errors.LockNotAvailable when another session
    holds the batch for longer than INGEST_CLAIM_LOCK_TIMEOUT_S (the task retries it).

    On PostgreSQL the transaction will also commit without waiting for its WAL flush: safe for processing a
    batch, never for storing one. If the server crashes before the flush, the samples, rollups and the mark
    vanish together and the sweep processes the inbox row again.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("inbox_claim must run inside the transaction that processes the batch")
    if connection.vendor != "postgresql":
        inbox = (
            IngestBatch.objects.select_for_update()
            .filter(pk=inbox_pk, processed_at__isnull=True, dead_at__isnull=True)
            .first()
        )
        if inbox is None:
            return None
        inbox.processed_at = timezone.now()
        inbox.attempts += 1
        inbox.last_error = ""
        inbox.save(update_fields=["processed_at", "attempts", "last_error"])
        return inbox.format, bytes(inbox.body), inbox.source
    # Both statements in one round trip (pipeline mode); binary: the body comes back as its bytes.
    with connection.connection.pipeline(), psycopg.Cursor(connection.connection) as cursor:
        cursor.execute("SET LOCAL synchronous_commit TO OFF")
        cursor.execute(f"SET LOCAL lock_timeout = {int(settings.INGEST_CLAIM_LOCK_TIMEOUT_S * 1000)}")
        cursor.execute(INBOX_CLAIM, [timezone.now(), inbox_pk], binary=True)
        return cursor.fetchone()


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


# The lookups every batch makes, as fixed statements on PostgreSQL: building the same ORM query for each batch
# cost more than running it.
KNOWN_CLUSTERS = "SELECT name, id FROM fleet_cluster WHERE name = ANY(%s)"
KNOWN_IDS = """
SELECT t.id, t.cluster_id, t.{field} FROM {table} t
JOIN unnest(%s::int8[], %s::text[]) AS k (cluster_id, value) ON t.cluster_id = k.cluster_id AND t.{field} = k.value
"""
UNNAMED_JOBS = "SELECT id FROM usage_job WHERE id = ANY(%s) AND gpu_model = ''"


def _known_clusters(names: set[str]) -> dict[str, int]:
    if connection.vendor != "postgresql":
        return dict(Cluster.objects.filter(name__in=names).values_list("name", "id"))
    with connection.cursor() as cursor:
        cursor.execute(KNOWN_CLUSTERS, [sorted(names)])
        return dict(cursor.fetchall())


def clusters_ensure(names: Iterable[str]) -> dict[str, int]:
    names = set(names)
    known = _known_clusters(names)
    if len(known) < len(names):  # only a new cluster costs a write
        Cluster.objects.bulk_create([Cluster(name=n) for n in names - known.keys()], ignore_conflicts=True)
        known = _known_clusters(names)
    return known


def _known_ids(model, field: str, keys: set[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """(cluster id, `field`) -> id of the rows of `model` among `keys` that exist."""
    if connection.vendor == "postgresql":
        ordered = sorted(keys)
        with connection.cursor() as cursor:
            cursor.execute(
                KNOWN_IDS.format(table=model._meta.db_table, field=field),
                [[c for c, _ in ordered], [v for _, v in ordered]],
            )
            return {(c, v): pk for pk, c, v in cursor.fetchall()}
    rows = model.objects.filter(cluster_id__in={c for c, _ in keys}, **{f"{field}__in": {v for _, v in keys}})
    return {(c, v): pk for pk, c, v in rows.order_by().values_list("id", "cluster_id", field) if (c, v) in keys}


def _unnamed_jobs(ids: Iterable[int]) -> set[int]:
    """Those of the jobs `ids` that have no GPU model yet."""
    if connection.vendor != "postgresql":
        return set(Job.objects.filter(pk__in=ids, gpu_model="").values_list("pk", flat=True))
    with connection.cursor() as cursor:
        cursor.execute(UNNAMED_JOBS, [sorted(ids)])
        return {pk for (pk,) in cursor.fetchall()}


def _ids_ensure(model, field: str, keys: set[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """(cluster id, `field`) -> id, creating the rows not known yet (no lock on known ones)."""
    ids = _known_ids(model, field, keys)
    if len(ids) < len(keys):  # sorted: two workers creating the same rows wait rather than deadlock
        missing = sorted(keys - ids.keys())
        model.objects.bulk_create([model(cluster_id=c, **{field: v}) for c, v in missing], ignore_conflicts=True)
        ids = _known_ids(model, field, keys)
    return ids


def nodes_ensure(keys: set[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """(cluster id, node name) -> node id, creating the nodes not seen before (no lock on known ones)."""
    return _ids_ensure(Node, "name", keys)


# The node rows are locked by ascending id before they are updated: an UPDATE takes its row locks in scan
# order, which differs between two workers updating the same rows (new row versions move). NO KEY: the
# foreign-key checks of another worker's commit (KEY SHARE on the same nodes) do not wait for these locks.
NODES_TOUCH = """
UPDATE fleet_node SET last_seen_at = %s
WHERE id IN (SELECT id FROM fleet_node WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE)
"""


GPU_COLUMNS = (
    ("cluster_id", "int8"), ("uuid", "text"), ("node_id", "int8"), ('"index"', "int4"), ("model", "text"),
    ("memory_total_mib", "float8"), ("numa_node", "int4"), ("mig_profile", "text"), ("first_seen_at", "timestamptz"),
    ("last_seen_at", "timestamptz"),
)  # fmt: skip
# PostgreSQL takes the GPUs as one array per column: the statement's text is the same for every batch (and
# psycopg's conversion of it cached), where a VALUES list would be a new text per batch size.
GPU_ROWS = {
    "postgresql": "SELECT * FROM unnest({})".format(", ".join(f"%s::{t}[]" for _, t in GPU_COLUMNS)),
    "sqlite": "VALUES {}",
}
GPU_UPSERT = f"""
INSERT INTO fleet_gpu ({", ".join(c for c, _ in GPU_COLUMNS)})
{{rows}}
ON CONFLICT (cluster_id, uuid) DO {{action}}
"""
GPU_FACTS_NEWER = """UPDATE SET
    node_id = CASE WHEN {newer} THEN excluded.node_id ELSE fleet_gpu.node_id END,
    "index" = CASE WHEN {newer} THEN excluded."index" ELSE fleet_gpu."index" END,
    model = CASE WHEN {newer} THEN excluded.model ELSE fleet_gpu.model END,
    memory_total_mib = CASE WHEN {newer} AND excluded.memory_total_mib IS NOT NULL THEN excluded.memory_total_mib
        ELSE fleet_gpu.memory_total_mib END,
    numa_node = CASE WHEN {newer} THEN excluded.numa_node ELSE fleet_gpu.numa_node END,
    mig_profile = CASE WHEN {newer} THEN excluded.mig_profile ELSE fleet_gpu.mig_profile END,
    first_seen_at = {least}(fleet_gpu.first_seen_at, excluded.first_seen_at),
    last_seen_at = {greatest}(fleet_gpu.last_seen_at, excluded.last_seen_at)"""


def _gpus_upsert(
    gpus: Sequence[GpuFacts], cluster_ids: dict[str, int], node_ids: dict, *, facts: bool
) -> tuple[str, list[object]]:
    """One statement for the batch's GPUs, in (cluster, uuid) order, and its parameters: insert the new ones;
    with `facts`, also fold the batch's facts into the known ones (a later sample's facts win)."""
    postgres = connection.vendor == "postgresql"
    rows = []
    for g in sorted(gpus, key=lambda g: (cluster_ids[g.cluster], g.uuid)):
        cid = cluster_ids[g.cluster]
        rows.append((
            cid, g.uuid, node_ids[(cid, g.node)], g.index, g.model, g.mem_total_mib, g.numa_node, g.mig_profile,
            g.first_seen, g.last_seen,
        ))  # fmt: skip
    if postgres:
        params: list[object] = [list(column) for column in zip(*rows, strict=True)]
        values = GPU_ROWS["postgresql"]
    else:
        adapt = connection.ops.adapt_datetimefield_value
        params = [v for row in rows for v in (*row[:8], adapt(row[8]), adapt(row[9]))]
        values = GPU_ROWS["sqlite"].format(", ".join([f"({', '.join(['%s'] * len(GPU_COLUMNS))})"] * len(rows)))
    action = "NOTHING"
    if facts:
        action = GPU_FACTS_NEWER.format(
            newer="excluded.last_seen_at >= fleet_gpu.last_seen_at",
            least="LEAST" if postgres else "min",
            greatest="GREATEST" if postgres else "max",
        )
    return GPU_UPSERT.format(rows=values, action=action), params


def gpu_ids_ensure(gpus: Sequence[GpuFacts], cluster_ids: dict[str, int]) -> list[int]:
    """Ids of the batch's GPUs, in the same order; new GPUs (and their nodes) are created. Known GPUs are
    not locked here: their facts are folded in by `fleet_touch`, at the end of the transaction."""
    keys = {(cluster_ids[g.cluster], g.uuid) for g in gpus}
    ids = _known_ids(Gpu, "uuid", keys)
    if len(ids) < len(keys):
        new = [g for g in gpus if (cluster_ids[g.cluster], g.uuid) not in ids]
        node_ids = nodes_ensure({(cluster_ids[g.cluster], g.node) for g in new})
        with connection.cursor() as cursor:
            cursor.execute(*_gpus_upsert(new, cluster_ids, node_ids, facts=False))
        ids = _known_ids(Gpu, "uuid", keys)
    return [ids[(cluster_ids[g.cluster], g.uuid)] for g in gpus]


def fleet_touch(gpus: Sequence[GpuFacts], cluster_ids: dict[str, int]) -> None:
    """Mark the batch's nodes seen and fold its facts into its GPUs: short row locks, in a fixed order."""
    if not gpus:
        return
    node_ids = nodes_ensure({(cluster_ids[g.cluster], g.node) for g in gpus})
    upsert, params = _gpus_upsert(gpus, cluster_ids, node_ids, facts=True)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":  # nodes, then GPUs, in one round trip
            cursor.execute(f"{NODES_TOUCH};\n{upsert}", [timezone.now(), sorted(node_ids.values()), *params])
            return
        Node.objects.filter(pk__in=node_ids.values()).update(last_seen_at=timezone.now())  # SQLite: no row locks
        cursor.execute(upsert, params)


def _merge_job(job: Job, rec: JobRecord, project_id: int | None) -> None:
    job.user_name = rec.user
    job.account = rec.project
    job.team_name = rec.team or job.team_name
    job.project_id = project_id or job.project_id
    # A count is known once a source declares one; a later record may change it (squeue while running, sacct at
    # the end) but never unknown it: null or 0 from a source that does not account GPUs leaves it as it was.
    if rec.gpus:
        job.gpus = rec.gpus
    elif job.gpus is None:
        job.gpus = rec.gpus
    job.gpu_model = rec.gpu_model or job.gpu_model
    job.submit_time = rec.submit_time
    # The earliest start known wins: an agent restarted mid-pod sees the pod "first" again later, and moving the
    # start forward would drop the hours before it from the bill.
    job.start_time = min((t for t in (rec.start_time, job.start_time) if t is not None), default=None)
    # A replayed older record never reopens a job that has ended.
    if job.end_time is None or rec.end_time is not None:
        job.end_time = rec.end_time or job.end_time
        if job.state not in TERMINAL_STATES or rec.state in TERMINAL_STATES:
            job.state = rec.state
    job.labels = {**job.labels, **rec.labels}
    job.described = True


# What a job record may change, with each column's type for the one-statement update below.
JOB_COLUMNS = (
    ("user_name", "text"), ("account", "text"), ("team_name", "text"), ("project_id", "int8"), ("gpus", "int4"),
    ("gpu_model", "text"), ("submit_time", "timestamptz"), ("start_time", "timestamptz"),
    ("end_time", "timestamptz"), ("state", "text"), ("labels", "jsonb"), ("described", "bool"),
)  # fmt: skip
JOB_FIELDS = [name for name, _ in JOB_COLUMNS]

# One statement for every changed job (PostgreSQL): Django's bulk_update builds a CASE per field and job,
# which costs about a millisecond per job in Python.
JOBS_UPDATE = """
UPDATE usage_job SET {assignments}, updated_at = %s
FROM unnest(%s::int8[], {arrays}) AS v (id, {fields}) WHERE usage_job.id = v.id
"""


def _job_values(job: Job) -> tuple:
    return tuple(getattr(job, field) for field in JOB_FIELDS)


def _jobs_update(jobs: list[Job]) -> None:
    if connection.vendor != "postgresql":
        Job.objects.bulk_update(jobs, JOB_FIELDS)
        return
    sql = JOBS_UPDATE.format(
        assignments=", ".join(f"{f} = v.{f}" for f in JOB_FIELDS),
        arrays=", ".join(f"%s::{t}[]" for _, t in JOB_COLUMNS),
        fields=", ".join(JOB_FIELDS),
    )
    columns = [[job.pk for job in jobs]]
    for field in JOB_FIELDS:
        values = [getattr(job, field) for job in jobs]
        columns.append([json.dumps(v) for v in values] if field == "labels" else values)
    with connection.cursor() as cursor:
        cursor.execute(sql, [timezone.now(), *columns])


def job_ids_ensure(keys: Iterable[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """(cluster id, external id) -> job id, creating the jobs not known yet (no lock on known ones)."""
    keys = set(keys)
    return _ids_ensure(Job, "external_id", keys) if keys else {}


def jobs_apply(
    records: Sequence[JobRecord], models: dict[int, str], cluster_ids: dict[str, int], *, create_projects: bool
) -> None:
    """Merge job records into their jobs (later facts win; an end time is never erased), and give a job
    that has no GPU model yet the one its samples ran on (`models`: job id -> model). `create_projects`: a
    record naming an unknown team and project creates them (an operator's import, never the API)."""
    keys = {(cluster_ids[r.cluster], r.job_id) for r in records}
    unnamed = _unnamed_jobs(models) if models else set()
    if not keys and not unnamed:
        return
    ids = job_ids_ensure(keys)
    # One acquisition, in id order, for every job this batch changes.
    locked = Job.objects.select_for_update(no_key=True).filter(pk__in={*ids.values(), *unnamed}).order_by("pk")
    jobs = {job.pk: job for job in locked}
    before = {pk: _job_values(job) for pk, job in jobs.items()}
    project_id = project_ids_resolver(create=create_projects)
    for rec in records:
        job = jobs[ids[(cluster_ids[rec.cluster], rec.job_id)]]
        _merge_job(job, rec, project_id(rec.project, rec.team, rec.cluster))
    for pk, model in models.items():
        if pk in jobs and not jobs[pk].gpu_model:
            jobs[pk].gpu_model = model
    # A collector repeats a running job's record every scrape; rewriting unchanged rows is most of the cost.
    changed = [job for pk, job in jobs.items() if _job_values(job) != before[pk]]
    if changed:
        _jobs_update(changed)
        times = (JOB_FIELDS.index("start_time"), JOB_FIELDS.index("end_time"))
        job_days_mark(
            (job.pk, job.cluster_id, _earliest(job.start_time, before[job.pk][times[0]]),
             _latest(job.end_time, before[job.pk][times[1]]))
            for job in changed
        )  # fmt: skip


def _earliest(*moments):
    known = [m for m in moments if m is not None]
    return min(known) if known else None


def _latest(*moments):
    return None if any(m is None for m in moments) else max(moments)


def _stage(rows: list[tuple] | memoryview, gpu_ids: list[int], job_ids: list[int]) -> None:
    """Fill the per-transaction staging table.

    PostgreSQL: the rows name GPUs and jobs by header position and, when they come from the inbox, are
    already in binary COPY format: they are streamed in as they are, and the statements below map
    positions to ids in SQL. SQLite: rows are inserted with their ids.
    """
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            typed = ", ".join(f"{c} {t}" for c, t in zip(prepared.STAGE_COLUMNS, prepared.STAGE_TYPES, strict=True))
            hours = ", ".join(f"{c} {t}" for c, t in zip(HOUR_COLUMNS, HOUR_TYPES, strict=True))
            # One round trip. Each commit empties both tables; the DELETEs are for two batches sharing one
            # transaction (an import), and on the usual empty tables cost nothing, where a TRUNCATE would
            # give each table new files for every batch.
            cursor.execute(
                f"CREATE TEMP TABLE IF NOT EXISTS {STAGE} ({typed}) ON COMMIT DELETE ROWS;"
                f" CREATE TEMP TABLE IF NOT EXISTS {HOUR_STAGE} ({hours}) ON COMMIT DELETE ROWS;"
                f" DELETE FROM {STAGE}; DELETE FROM {HOUR_STAGE}"
            )
            cols = ", ".join(prepared.STAGE_COLUMNS)
            with cursor.cursor.copy(f"COPY {STAGE} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
                if isinstance(rows, memoryview):
                    copy.write(rows)
                else:
                    copy.set_types(prepared.STAGE_TYPES)
                    for row in rows:
                        copy.write_row(row)
            return
        cols = ", ".join(SAMPLE_COLUMNS)
        cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {STAGE} ({cols})")
        cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {HOUR_STAGE} ({', '.join(HOUR_COLUMNS)})")
        cursor.execute(f"DELETE FROM {STAGE}")
        cursor.execute(f"DELETE FROM {HOUR_STAGE}")
        marks = ", ".join(["%s"] * len(SAMPLE_COLUMNS))
        adapt = connection.ops.adapt_datetimefield_value
        cursor.executemany(
            f"INSERT INTO {STAGE} ({cols}) VALUES ({marks})",
            [(adapt(r[0]), *r[1:]) for r in prepared.rows_with_ids(rows, gpu_ids, job_ids)],
        )


def _sql(template: str) -> str:
    """The statement for this database: {gpu} and {job} are a staged row's ids, {gpu_key} and {job_key}
    what to group by (PostgreSQL: header positions, looked up in the batch's id arrays)."""
    return template.format(stage=STAGE, **(_POSTGRES if connection.vendor == "postgresql" else _SQLITE))


_POSTGRES = {
    "hour": "date_trunc('hour', ts)",
    "greatest": "GREATEST",
    # A GPU on a node past the mask's 63 bits tests the sign bit, which no job's CPU node sets.
    "mismatch": "(cpu_numa_mask & (1::int8 << least(gpu_numa_node, 63))) = 0",
    "gpu": "(%(gpu_ids)s::int8[])[gpu_ix]",
    "job": "(%(job_ids)s::int8[])[job_ix]",
    "gpu_key": "gpu_ix",
    "job_key": "job_ix",
}
_SQLITE = {
    "hour": "strftime('%%Y-%%m-%%d %%H:00:00', ts)",
    "greatest": "max",
    "mismatch": "(cpu_numa_mask & (1 << min(gpu_numa_node, 63))) = 0",
    "gpu": "gpu_id",
    "job": "job_id",
    "gpu_key": "gpu_id",
    "job_key": "job_id",
}


INSERT_SAMPLES = (
    f"INSERT INTO usage_sample ({', '.join(SAMPLE_COLUMNS)})"
    f" SELECT ts, {{gpu}}, {{job}}, {', '.join(prepared.READING_COLUMNS)} FROM {{stage}}"
)

# The batch's samples are aggregated once per (job, GPU, hour), unallocated samples under a NULL job; both
# rollups are then folded from that handful of rows rather than from the samples again. A null SM counts in
# `samples` (the GPU was there) but not in `sm_samples`, the SM mean's divisor, nor as idle: unknown, not 0.
HOUR_STAGE = "usage_hour_stage"
# Each column of that aggregate, its type, and how a rollup row takes in a later batch's value.
HOURS = (
    ("job_id", "int8", None), ("gpu_id", "int8", None), ("hour", "timestamptz", None), ("samples", "int4", "sum"),
    ("sm_samples", "int4", "sum"), ("idle_samples", "int4", "sum"), ("sm_sum", "float8", "sum"),
    ("sm_max", "float8", "max"), ("sm_sq_sum", "float8", "sum"), ("mem_used_max", "float8", "max"),
    ("mem_total_mib", "float8", "max"), ("power_sum", "float8", "sum"), ("power_samples", "int4", "sum"),
    ("numa_mismatch_samples", "int4", "sum"), ("io_wait_sum", "float8", "sum"), ("io_wait_samples", "int4", "sum"),
    ("host_cpu_sum", "float8", "sum"), ("host_cpu_samples", "int4", "sum"), ("tensor_sum", "float8", "sum"),
    ("tensor_samples", "int4", "sum"),
)  # fmt: skip
HOUR_COLUMNS = tuple(name for name, _, _ in HOURS)
HOUR_TYPES = tuple(kind for _, kind, _ in HOURS)
GPU_HOUR_FOLDS = {
    "samples": "sum", "allocated_samples": "sum", "sm_samples": "sum", "idle_samples": "sum", "sm_sum": "sum",
    "mem_used_max": "max", "power_sum": "sum", "power_samples": "sum",
}  # fmt: skip


def _folded(table: str, folds: dict[str, str]) -> str:
    """The SET list of a rollup upsert: sums add up, maxima keep the greater (an unknown maximum, null, gives way to
    a known one; SQLite's max() of a null is null, hence the coalesces)."""
    return ",\n    ".join(
        f"{c} = {table}.{c} + excluded.{c}"
        if how == "sum"
        else f"{c} = {{greatest}}(coalesce({table}.{c}, excluded.{c}), coalesce(excluded.{c}, {table}.{c}))"
        for c, how in folds.items()
    )


AGGREGATE_HOURS = f"""
INSERT INTO {HOUR_STAGE} ({", ".join(HOUR_COLUMNS)})
SELECT {{job}}, {{gpu}}, {{hour}}, count(*), count(sm_util), count(*) FILTER (WHERE sm_util < %(idle)s),
    coalesce(sum(sm_util), 0), max(sm_util), coalesce(sum(sm_util * sm_util), 0), max(mem_used_mib),
    max(mem_total_mib), coalesce(sum(power_w), 0),
    count(power_w), count(*) FILTER (WHERE {{mismatch}}), coalesce(sum(io_wait), 0), count(io_wait),
    coalesce(sum(host_cpu_util), 0), count(host_cpu_util), coalesce(sum(tensor_active), 0), count(tensor_active)
FROM {{stage}} GROUP BY {{job_key}}, {{gpu_key}}, {{hour}}
"""

# Each rollup upsert takes its row locks in key order (ORDER BY the ids), so two workers folding batches
# into the same hours wait for each other rather than deadlock.
UPSERT_JOB_HOURS = f"""
INSERT INTO usage_jobgpuhour ({", ".join(HOUR_COLUMNS)})
SELECT {", ".join(HOUR_COLUMNS)} FROM {HOUR_STAGE} WHERE job_id IS NOT NULL ORDER BY job_id, gpu_id, hour
ON CONFLICT (job_id, gpu_id, hour) DO UPDATE SET
    {_folded("usage_jobgpuhour", {name: how for name, _, how in HOURS if how})}
"""

UPSERT_GPU_HOURS = f"""
INSERT INTO usage_gpuhour (gpu_id, hour, {", ".join(GPU_HOUR_FOLDS)})
SELECT gpu_id, hour, sum(samples), sum(CASE WHEN job_id IS NULL THEN 0 ELSE samples END), sum(sm_samples),
    sum(idle_samples), sum(sm_sum), max(mem_used_max), sum(power_sum), sum(power_samples)
FROM {HOUR_STAGE} GROUP BY gpu_id, hour ORDER BY gpu_id, hour
ON CONFLICT (gpu_id, hour) DO UPDATE SET
    {_folded("usage_gpuhour", GPU_HOUR_FOLDS)}
"""


# The columns the hour aggregate reads from the rows an insert wrote.
AGGREGATED_COLUMNS = (
    "ts", "gpu_id", "job_id", "sm_util", "mem_used_mib", "mem_total_mib", "power_w", "gpu_numa_node", "cpu_numa_mask",
    "io_wait", "host_cpu_util", "tensor_active",
)  # fmt: skip

# PostgreSQL: a reading already stored (same GPU and time, from any batch, or twice in this one) is skipped by
# the unique index, and only the rows the insert wrote are aggregated, so a replay counts once in the rollups
# too. Concurrent workers writing the same reading wait on the index entry, then skip it. The insert maps header
# positions to ids; the aggregate reads the ids the insert returned.
_WRITTEN = {"stage": "written", "gpu": "gpu_id", "job": "job_id", "gpu_key": "gpu_id", "job_key": "job_id"}
WRITE_SAMPLES_POSTGRES = f"""
WITH written AS (
    {INSERT_SAMPLES.format(**_POSTGRES, stage=STAGE)}
    ON CONFLICT (gpu_id, ts) DO NOTHING
    RETURNING {", ".join(AGGREGATED_COLUMNS)}
)
{AGGREGATE_HOURS.format(**{**_POSTGRES, **_WRITTEN})}
"""

# SQLite (one writer at a time): the staged readings already stored, or staged twice, leave the stage first.
UNSTAGE_STORED_SQLITE = (
    "DELETE FROM {stage} WHERE rowid NOT IN (SELECT min(rowid) FROM {stage} GROUP BY gpu_id, ts)",
    "DELETE FROM {stage} WHERE EXISTS"
    " (SELECT 1 FROM usage_sample s WHERE s.gpu_id = {stage}.gpu_id AND s.ts = {stage}.ts)",
)


def samples_write(rows: list[tuple] | memoryview, gpu_ids: list[int], job_ids: list[int]) -> None:
    """Append staging rows to the samples, skipping readings stored before, and aggregate those written per job,
    GPU and hour, set-based (no row locks)."""
    if not connection.in_atomic_block:
        raise RuntimeError("samples_write must run inside a transaction (the staging table is per transaction)")
    _stage(rows, gpu_ids, job_ids)
    params: dict[str, object] = {"idle": settings.GOVERNANCE_IDLE_SM_PERCENT}
    if connection.vendor == "postgresql":
        params.update(gpu_ids=gpu_ids, job_ids=job_ids)
        _execute_in_turn([WRITE_SAMPLES_POSTGRES], params)
        return
    _execute_in_turn([_sql(s) for s in (*UNSTAGE_STORED_SQLITE, INSERT_SAMPLES, AGGREGATE_HOURS)], params)


# The days the batch touched, for the pricing worker: each job's day, and each cluster's day (no job) for the
# capacity its GPUs add. Appended, never updated: no lock, no wait on pricing.
MARK_DAYS = {
    "postgresql": f"""INSERT INTO usage_pricingmark (job_id, cluster_id, day)
SELECT DISTINCT s.job_id, g.cluster_id, (s.hour AT TIME ZONE 'UTC')::date FROM {HOUR_STAGE} s
JOIN fleet_gpu g ON g.id = s.gpu_id""",
    "sqlite": f"""INSERT INTO usage_pricingmark (job_id, cluster_id, day)
SELECT DISTINCT s.job_id, g.cluster_id, date(s.hour) FROM {HOUR_STAGE} s JOIN fleet_gpu g ON g.id = s.gpu_id""",
}


def rollups_fold() -> None:
    """Fold the aggregate `samples_write` left into both hourly rollups (row locks in key order), and mark the
    days it touched for pricing."""
    _execute_in_turn([_sql(UPSERT_JOB_HOURS), _sql(UPSERT_GPU_HOURS), MARK_DAYS[connection.vendor]])


def _execute_in_turn(statements: Sequence[str], params: dict[str, object] | None = None) -> None:
    """Run `statements` in order with the same named parameters: on PostgreSQL in one round trip (a
    client-side-bound execute takes several statements), on SQLite, which takes one, one by one."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(";\n".join(statements), params)
            return
        for sql in statements:
            cursor.execute(sql, params)
