"""Merge job records into their jobs: later facts win, an unknown never erases a known one, one UPDATE for all."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from django.db import connection
from django.utils import timezone

from collectors.records import TERMINAL_STATES, JobRecord
from governance.lib.run_spans import runs_merge, runs_of, runs_stored
from governance.org.services import project_ids_resolver
from governance.usage.history import JobVersion, job_changes_record
from governance.usage.marks import job_days_mark
from governance.usage.models import Job
from governance.usage.writer.sql import ids_ensure, known_ids

UNNAMED_JOBS = "SELECT id FROM usage_job WHERE id = ANY(%s) AND gpu_model = ''"
UNATTRIBUTED_PODS = "SELECT id FROM usage_job WHERE id = ANY(%s) AND NOT described AND account = ''"


def _unnamed_jobs(ids: Iterable[int]) -> set[int]:
    """Those of the jobs `ids` that have no GPU model yet."""
    if connection.vendor != "postgresql":
        return set(Job.objects.filter(pk__in=ids, gpu_model="").values_list("pk", flat=True))
    with connection.cursor() as cursor:
        cursor.execute(UNNAMED_JOBS, [sorted(ids)])
        return {pk for (pk,) in cursor.fetchall()}


def _unattributed_pods(ids: Iterable[int]) -> set[int]:
    """Those of the jobs `ids` that no job record described and that have no account (namespace) yet."""
    if connection.vendor != "postgresql":
        return set(Job.objects.filter(pk__in=ids, described=False, account="").values_list("pk", flat=True))
    with connection.cursor() as cursor:
        cursor.execute(UNATTRIBUTED_PODS, [sorted(ids)])
        return {pk for (pk,) in cursor.fetchall()}


def jobs_waiting_on_samples(sampled: Collection[int], pods: Collection[int]) -> set[int]:
    """Those of the jobs samples name (`sampled`; `pods`, those of them named `namespace/pod`) that the samples
    would change in `jobs_apply`: a job with no GPU model yet, a pod no record described that has no namespace."""
    return (_unnamed_jobs(sampled) if sampled else set()) | (_unattributed_pods(pods) if pods else set())


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
    known = runs_of(job.runs, job.start_time, job.end_time)
    job.start_time = min((t for t in (rec.start_time, job.start_time) if t is not None), default=None)
    # A replayed older record never reopens a job that has ended.
    if job.end_time is None or rec.end_time is not None:
        job.end_time = rec.end_time or job.end_time
        if job.state not in TERMINAL_STATES or rec.state in TERMINAL_STATES:
            job.state = rec.state
    # What is billed is its runs: a requeued job that waits to run again holds nothing meanwhile.
    reported = [(r.start, r.end) for r in rec.runs] or ([(rec.start_time, rec.end_time)] if rec.start_time else [])
    runs = runs_merge(known, reported, end=job.end_time)
    if runs:
        job.start_time = min(job.start_time or runs[0][0], runs[0][0])
    job.runs = runs_stored(runs, job.start_time, job.end_time)
    job.labels = {**job.labels, **rec.labels}
    job.described = True


# What a job record may change, with each column's type for the one-statement update below.
JOB_COLUMNS = (
    ("user_name", "text"), ("account", "text"), ("team_name", "text"), ("project_id", "int8"), ("gpus", "numeric"),
    ("gpu_model", "text"), ("submit_time", "timestamptz"), ("start_time", "timestamptz"),
    ("end_time", "timestamptz"), ("state", "text"), ("labels", "jsonb"), ("described", "bool"), ("runs", "jsonb"),
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
    columns: list[list[Any]] = [[job.pk for job in jobs]]
    for field in JOB_FIELDS:
        values = [getattr(job, field) for job in jobs]
        columns.append([json.dumps(v) for v in values] if field in ("labels", "runs") else values)
    with connection.cursor() as cursor:
        cursor.execute(sql, [timezone.now(), *columns])


def job_ids_ensure(keys: Iterable[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """(cluster id, external id) -> job id, creating the jobs not known yet (no lock on known ones)."""
    keys = set(keys)
    return ids_ensure(Job, "external_id", keys) if keys else {}


def jobs_apply(
    records: Sequence[JobRecord],
    models: dict[int, str],
    cluster_ids: dict[str, int],
    *,
    create_projects: bool,
    pods: dict[int, tuple[str, str]] | None = None,
) -> None:
    """Merge job records into their jobs (later facts win; an end time is never erased), and give a job
    that has no GPU model yet the one its samples ran on (`models`: job id -> model). `create_projects`: a
    record naming an unknown team and project creates them (an operator's import, never the API).

    `pods`: job id -> (namespace, cluster) of the `namespace/pod` jobs the batch's samples name. One that no
    job record describes is attributed by its namespace, as a described pod is (its project is its namespace's
    mapping), until a record says otherwise."""
    keys = {(cluster_ids[r.cluster], r.job_id) for r in records}
    unnamed = _unnamed_jobs(models) if models else set()
    unattributed = _unattributed_pods(pods) if pods else set()
    if not keys and not unnamed and not unattributed:
        return
    ids = job_ids_ensure(keys)
    # One acquisition, in id order, for every job this batch changes.
    changing = {*ids.values(), *unnamed, *unattributed}
    locked = Job.objects.select_for_update(no_key=True).filter(pk__in=changing).order_by("pk")
    jobs = {job.pk: job for job in locked}
    before = {pk: _job_values(job) for pk, job in jobs.items()}
    project_id = project_ids_resolver(create=create_projects)
    for rec in records:
        job = jobs[ids[(cluster_ids[rec.cluster], rec.job_id)]]
        _merge_job(job, rec, project_id(rec.project, rec.team, rec.cluster))
    for pk, model in models.items():
        if pk in jobs and not jobs[pk].gpu_model:
            jobs[pk].gpu_model = model
    for pk in unattributed:
        job = jobs[pk]
        if pods and not job.described and not job.account:  # a record in this batch describes it: it wins
            namespace, cluster = pods[pk]
            job.account, job.project_id = namespace, project_id(namespace, None, cluster)
    # A collector repeats a running job's record every scrape; rewriting unchanged rows is most of the cost.
    changed = [job for pk, job in jobs.items() if _job_values(job) != before[pk]]
    if changed:
        _jobs_update(changed)
        times = (JOB_FIELDS.index("start_time"), JOB_FIELDS.index("end_time"))
        priced = [job for job in changed if _priced_values(job) != _priced_values(before[job.pk])]
        job_days_mark(
            ((job.pk, job.cluster_id, _earliest(job.start_time, before[job.pk][times[0]]),
              _end_marked(job.end_time, before[job.pk][times[1]]))
             for job in priced),
            new=[job.pk for job in priced if before[job.pk][times[0]] is None],
            sampled=models,
        )  # fmt: skip
        # A job that had started was on a bill: what this batch changed on it is kept as its history.
        names = {pk: name for name, pk in cluster_ids.items()}
        job_changes_record(versions=[
            JobVersion(job.pk, f"{names.get(job.cluster_id, job.cluster_id)}/{job.external_id}",
                       dict(zip(JOB_FIELDS, before[job.pk], strict=True)), {f: getattr(job, f) for f in JOB_FIELDS})
            for job in changed if before[job.pk][times[0]] is not None
        ])  # fmt: skip


def _earliest(*moments):
    known = [m for m in moments if m is not None]
    return min(known) if known else None


def _end_marked(end, was):
    """The end a change marks to: the later of the two ends; a job whose end arrives, its end (a day the ledger billed
    past it is re-priced by the pricing pass); None (now) for one that is open again."""
    if end is None:
        return None
    return end if was is None else max(end, was)


# What the ledger prices from a job's record: a change of anything else (state, labels) re-prices nothing.
PRICED_FIELDS = (
    "user_name", "account", "team_name", "project_id", "gpus", "gpu_model", "start_time", "end_time", "runs",
)  # fmt: skip
PRICED_AT = tuple(JOB_FIELDS.index(name) for name in PRICED_FIELDS)


def _priced_values(job_or_values: Job | tuple) -> tuple:
    values = _job_values(job_or_values) if isinstance(job_or_values, Job) else job_or_values
    return tuple(values[i] for i in PRICED_AT)


SOURCE_RECORD = """
UPDATE usage_job SET source_token_id = %s WHERE id IN (
    SELECT id FROM usage_job WHERE id = ANY(%s) AND source_token_id IS DISTINCT FROM %s ORDER BY id FOR NO KEY UPDATE
)"""


def jobs_source_record(records: Sequence[JobRecord], cluster_ids: dict[str, int], token_id: int | None) -> None:
    """Record which ingest token wrote each job's latest record (None: an import), so that what a record claims
    beyond the GPUs that exist is put down to the token that sent it. Rows in id order, like every job lock."""
    ids = known_ids(Job, "external_id", {(cluster_ids[r.cluster], r.job_id) for r in records})
    if connection.vendor != "postgresql":
        Job.objects.filter(pk__in=ids.values()).update(source_token_id=token_id)
        return
    with connection.cursor() as cursor:
        cursor.execute(SOURCE_RECORD, [token_id, sorted(ids.values()), token_id])
