"""Ingest: store a validated batch durably (the inbox), then process it exactly once."""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial

import psycopg
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Case, When
from django.utils import timezone

from collectors.records import Batch, decode_batch, encode, pod_namespace, records_check
from governance.lib.doors import door_entered
from governance.lib.enqueue import enqueue_coalesced_on_commit, task_named
from governance.usage import groups, prepared, writer
from governance.usage.fleet_growth import fleet_growth_check
from governance.usage.models import IngestBatch
from governance.usage.prepared import Prepared

logger = logging.getLogger(__name__)

# The charge ledger's re-pricing (governance/costs), enqueued by name: usage never imports costs.
REPRICE_TASK = "costs.reprice"
PROCESS_TASK = "usage.process_batch"
BATCH_ID_CONFLICT = "batch_id {batch_id} was already received with different records"


class BatchConflict(Exception):
    """The batch id is known, but with other contents: a client bug, never silently merged."""


@dataclass(frozen=True)
class Receipt:
    batch_id: uuid.UUID
    records: int
    duplicate: bool


@dataclass(frozen=True)
class ProcessResult:
    jobs: int
    samples: int
    batches: int = 1  # written in the same transaction (a group of small batches)


@dataclass(frozen=True)
class IngestWindow:
    """The times ingest accepts now: samples from `samples_from`, job times from `jobs_from`, both until `until`."""

    samples_from: datetime
    jobs_from: datetime
    until: datetime


# An operator's import may backfill history older than the API accepts (late samples older than retention still
# count in the rollups), but nothing from before GPUs reported usage, and nothing from the future either.
BACKFILL_FLOOR = datetime(2000, 1, 1, tzinfo=UTC)


def ingest_window(*, now: datetime | None = None, backfill: bool = False) -> IngestWindow:
    """From the retention horizon (or INGEST_MAX_AGE_DAYS when samples are kept forever; job times always that)
    to INGEST_MAX_FUTURE_MINUTES ahead of now. `backfill` (an operator's import): from BACKFILL_FLOOR."""
    now = now or timezone.now()
    until = now + timedelta(minutes=settings.INGEST_MAX_FUTURE_MINUTES)
    if backfill:
        return IngestWindow(samples_from=BACKFILL_FLOOR, jobs_from=BACKFILL_FLOOR, until=until)
    oldest = now - timedelta(days=settings.INGEST_MAX_AGE_DAYS)
    retention = settings.SAMPLE_RETENTION_DAYS
    return IngestWindow(
        samples_from=now - timedelta(days=retention) if retention > 0 else oldest, jobs_from=oldest, until=until
    )


def batch_check(
    *, batch: Batch, clusters: Collection[str] | None, backfill: bool = False, now: datetime | None = None
) -> None:
    """Refuse (BatchInvalid, naming each record) records dated outside the ingest window or naming a cluster
    outside `clusters` (None: any)."""
    window = ingest_window(now=now, backfill=backfill)
    records_check(
        batch.records,
        samples_from=window.samples_from,
        jobs_from=window.jobs_from,
        until=window.until,
        clusters=clusters,
        mig_extra=settings.MIG_EXTRA_PROFILES,
    )


def usage_batch_receive(
    *, body: bytes, clusters: Collection[str] | None = None, token_id: int | None = None
) -> Receipt:
    """Validate a JSON batch sent through the API by the token `token_id` that may report `clusters` (None: any)
    and store it in the inbox; raises BatchInvalid or BatchConflict. Its records never create teams or projects,
    and the GPUs they name keep the fleet's bounds (governance/usage/fleet_growth.py)."""
    with writer.gc_paused():
        batch = decode_batch(body)
        batch_check(batch=batch, clusters=clusters)
        ready = prepared.prepare(batch)  # its pass over the records also finds what the fleet's bounds check
        fleet_growth_check(batch=batch, token_id=token_id, now=timezone.now(), first=ready.first_samples)
        return usage_batch_store(
            batch=batch, body=body, source=IngestBatch.Source.API, token_id=token_id, prepared_batch=ready
        )


def usage_batch_store(
    *, batch: Batch, body: bytes, source: str, token_id: int | None = None, prepared_batch: Prepared | None = None
) -> Receipt:
    """Store an already validated batch; once this returns, the batch is durable and will be processed.

    PostgreSQL stores the batch prepared (parsed here, once, and never again; `prepared_batch`: `batch` prepared
    already); SQLite stores the JSON.
    """
    digest = hashlib.sha256(body).hexdigest()
    stored, form = body, IngestBatch.Format.JSON
    if connection.vendor == "postgresql":
        connection.ensure_connection()
        ready = prepared_batch or prepared.prepare(batch)
        stored, form = prepared.encode(ready, connection.connection), IngestBatch.Format.PREPARED
    try:
        with transaction.atomic():
            inbox_pk = writer.inbox_insert(
                batch_id=batch.batch_id,
                collector=batch.collector,
                source=source,
                format=form,
                body=stored,
                body_sha256=digest,
                record_count=len(batch.records),
                token_id=token_id,
            )
            transaction.on_commit(lambda: _enqueue(inbox_pk))
    except IntegrityError:
        known = IngestBatch.objects.filter(batch_id=batch.batch_id).values_list("body_sha256", flat=True).first()
        if known is None:
            raise
        if known != digest:
            raise BatchConflict(BATCH_ID_CONFLICT.format(batch_id=batch.batch_id)) from None
        return Receipt(batch_id=batch.batch_id, records=len(batch.records), duplicate=True)
    return Receipt(batch_id=batch.batch_id, records=len(batch.records), duplicate=False)


# One immediate second try: it replaces a pooled broker connection that went stale while the broker restarted.
# No waiting between tries: a broker that is down must not slow down the `202` of a batch that is stored already.
ENQUEUE_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0, "interval_max": 0}
_broker_down_until = 0.0


def _publish(inbox_pk: int) -> None:
    task_named(PROCESS_TASK).apply_async((inbox_pk,), retry=True, retry_policy=ENQUEUE_RETRY_POLICY)


def _enqueue(inbox_pk: int) -> None:
    """Hand a stored batch to the workers; when the broker is down, leave it to the sweep, and for a few seconds
    do not try again (each try could cost the broker's connect timeout)."""
    global _broker_down_until
    if time.monotonic() < _broker_down_until:
        return
    try:
        _publish(inbox_pk)
    except Exception:  # broker down: the batch is safe in the inbox and the sweep will enqueue it
        _broker_down_until = time.monotonic() + settings.INGEST_ENQUEUE_PAUSE_S
        logger.warning("could not enqueue ingest batch %s; the sweep will retry", inbox_pk, exc_info=True)


def usage_batch_process(*, inbox_pk: int) -> ProcessResult | None:
    """Turn one inbox batch into jobs, samples and rollups, exactly once; None if already done, dead or taken.

    Each attempt is counted and committed before the work starts, so an attempt whose worker dies counts too; a
    failure rolls the batch back and records its error. After INGEST_MAX_ATTEMPTS attempts the batch is dead.

    A batch on its first attempt takes the batches waiting behind it with it, up to INGEST_COALESCE_BATCHES in all and
    INGEST_COALESCE_RECORDS records together (their attempts counted first too), and writes them in one transaction: a
    node agent's batch of 8 GPUs costs a worker mostly what any batch costs (a transaction, the lookups, the folds), not
    what its samples cost. When that write fails, the batch is written alone at once; the others, their failure
    recorded, are written alone by their own tasks.
    """
    attempt = writer.inbox_attempt_start(inbox_pk)
    if attempt is writer.Attempt.DEAD:
        logger.error("ingest batch %s is dead: %d attempts did not finish", inbox_pk, settings.INGEST_MAX_ATTEMPTS)
    if attempt is not writer.Attempt.STARTED:
        return None
    more = writer.inbox_attempt_start_more(
        inbox_pk, limit=settings.INGEST_COALESCE_BATCHES - 1, max_records=settings.INGEST_COALESCE_RECORDS
    )
    if more:
        try:
            return _claimed_write(inbox_pk, more)
        except _GroupFailed as failed:
            logger.warning("ingest batch %s failed in a group of %d (%r): writing it alone", inbox_pk,
                           len(failed.pks) + 1, failed.__cause__)  # fmt: skip
            for pk in failed.pks:
                inbox_failure_record(inbox_pk=pk, error=failed)
        finally:
            writer.inbox_group_released(more)
    return _claimed_write(inbox_pk)


class _GroupFailed(Exception):
    """Writing a batch with the batches `pks` failed (the cause is chained); nothing of it was kept."""

    def __init__(self, leader: int, pks: list[int]) -> None:
        super().__init__(leader, pks)
        self.leader, self.pks = leader, pks

    def __repr__(self) -> str:
        return f"written with batch {self.leader} in a group that failed: {self.__cause__!r}; next, alone"


def _claimed_write(inbox_pk: int, more: list[int] | None = None) -> ProcessResult | None:
    """Claim the batch and write it: with those of the batches `more` (whose attempts were counted) still waiting,
    raising _GroupFailed when that write fails; else alone, recording a failure on the batch."""
    others: list[writer.Claimed] = []
    try:
        with transaction.atomic():
            claimed = writer.inbox_claim(inbox_pk)
            if claimed is None:
                return None
            create = claimed.source == IngestBatch.Source.IMPORT
            with writer.gc_paused(), door_entered(groups.ingest_door(claimed)):
                others = writer.inbox_claim_more(claimed, more or [])
                if others:
                    jobs, samples = groups.group_write([claimed, *others], create_projects=create)
                    enqueue_coalesced_on_commit(REPRICE_TASK, every_s=settings.INGEST_REPRICE_EVERY_S)
                    return ProcessResult(jobs=jobs, samples=samples, batches=1 + len(others))
                if claimed.format == IngestBatch.Format.PREPARED:
                    decoded = prepared.decode(claimed.body)
                    return usage_prepared_write(batch=decoded, create_projects=create, token_id=claimed.token_id)
                # SQLite, or a batch stored before prepared batches existed
                batch = decode_batch(claimed.body)
                return usage_records_write(batch=batch, create_projects=create, token_id=claimed.token_id)
    except psycopg.errors.LockNotAvailable:  # another session holds the batch: not an attempt that failed
        raise
    except Exception as exc:
        if others:
            raise _GroupFailed(inbox_pk, [o.pk for o in others]) from exc
        inbox_failure_record(inbox_pk=inbox_pk, error=exc)
        raise


def inbox_failure_record(*, inbox_pk: int, error: BaseException) -> None:
    """Record the error of a failed attempt (counted when it started), and set the batch aside as dead once
    INGEST_MAX_ATTEMPTS attempts have failed. Runs after the rollback, in its own transaction."""
    if connection.in_atomic_block and connection.needs_rollback:
        return  # inside a broken outer transaction (a test, an import): nothing can be written now
    now = timezone.now()
    try:
        IngestBatch.objects.filter(pk=inbox_pk, processed_at__isnull=True, dead_at__isnull=True).update(
            last_error=repr(error)[:10_000],
            dead_at=Case(When(attempts__gte=settings.INGEST_MAX_ATTEMPTS, then=now), default=None),
        )
    except Exception:  # the database itself is gone: the sweep will bring the batch back
        logger.warning("could not record the failure of ingest batch %s", inbox_pk, exc_info=True)


def inbox_requeue(*, pks: Iterable[int]) -> int:
    """Give dead batches a new life: attempts start again and they are enqueued once this commits."""
    with transaction.atomic():
        revived = list(
            IngestBatch.objects.filter(pk__in=list(pks), dead_at__isnull=False, processed_at__isnull=True)
            .select_for_update()
            .values_list("pk", flat=True)
        )
        IngestBatch.objects.filter(pk__in=revived).update(dead_at=None, attempts=0, last_error="")
        for pk in revived:
            transaction.on_commit(partial(_enqueue, pk))
    return len(revived)


def usage_records_write(*, batch: Batch, create_projects: bool = False, token_id: int | None = None) -> ProcessResult:
    """Write a decoded batch now, in the current transaction (no inbox)."""
    return usage_prepared_write(batch=prepared.prepare(batch), create_projects=create_projects, token_id=token_id)


def usage_prepared_write(
    *, batch: Prepared, create_projects: bool = False, token_id: int | None = None
) -> ProcessResult:
    """Write a prepared batch in the current transaction: jobs, GPUs, samples and rollups.

    The bulk of the work (samples in, aggregated per hour) takes no row lock, so workers writing batches of
    the same cluster run side by side; what must lock (jobs, nodes, GPUs, rollup rows) comes last, briefly,
    and in one order everywhere (jobs, then nodes and GPUs, then rollups, each by key), so they never
    deadlock. `token_id`: the ingest token that sent the batch, recorded on the GPUs it introduces and on the jobs
    whose records it writes.
    """
    header = batch.header
    names = {g.cluster for g in header.gpus} | {r.cluster for r in header.jobs} | {c for c, _, _ in header.job_keys}
    cluster_ids = writer.clusters_ensure(names)
    models: dict[int, str] = {}
    pods: dict[int, tuple[str, str]] = {}
    if header.samples:
        by_key = writer.job_ids_ensure((cluster_ids[c], e) for c, e, _ in header.job_keys)
        job_ids = [by_key[(cluster_ids[c], e)] for c, e, _ in header.job_keys]
        models = {pk: model for pk, (_, _, model) in zip(job_ids, header.job_keys, strict=True)}
        pods = {pk: (namespace, c) for pk, (c, e, _) in zip(job_ids, header.job_keys, strict=True)
                if (namespace := pod_namespace(e))}  # fmt: skip
        gpu_ids = writer.gpu_ids_ensure(header.gpus, cluster_ids, token_id=token_id)
        writer.samples_write(batch.rows, gpu_ids, job_ids, batch.readings)
    writer.jobs_apply(header.jobs, models, cluster_ids, create_projects=create_projects, pods=pods)
    if header.jobs:
        writer.jobs_source_record(header.jobs, cluster_ids, token_id)
    if header.samples:
        writer.fleet_touch(header.gpus, cluster_ids)
        writer.rollups_fold()
    # One pricing pass a second per ingest worker, whatever the batches a second: a pass prices every mark left.
    enqueue_coalesced_on_commit(REPRICE_TASK, every_s=settings.INGEST_REPRICE_EVERY_S)
    return ProcessResult(jobs=len(header.jobs), samples=header.samples)


def inbox_sweep(*, older_than: timedelta = timedelta(seconds=30), limit: int = 1000) -> int:
    """Enqueue inbox batches stored but not processed after `older_than` (their message was never sent, or lost
    with a worker or a broker, or an attempt failed); dead batches wait for an admin. Returns how many were
    enqueued. A batch enqueued twice is processed once."""
    cutoff = timezone.now() - older_than
    pks = list(
        IngestBatch.objects.filter(processed_at__isnull=True, dead_at__isnull=True, received_at__lte=cutoff)
        .order_by("received_at")
        .values_list("pk", flat=True)[:limit]
    )
    for n, pk in enumerate(pks):
        try:
            _publish(pk)
        except Exception:
            logger.warning("inbox sweep: the broker is down; %d of %d batches enqueued", n, len(pks), exc_info=True)
            return n
    return len(pks)


def inbox_purge(*, older_than: timedelta, chunk: int = 5000) -> int:
    """Delete inbox batches processed more than `older_than` ago, a range of ids at a time; returns how many.

    Never an unprocessed batch, nor one that keeps an error (a dead letter). Ids grow with the time received, so
    the walk stops at the first range holding a batch received after the cutoff.
    """
    cutoff = timezone.now() - older_than
    deleted = 0
    low = IngestBatch.objects.order_by("pk").values_list("pk", flat=True).first()
    while low is not None:
        in_range = IngestBatch.objects.filter(pk__gte=low, pk__lt=low + chunk)
        deleted += in_range.filter(processed_at__lt=cutoff, last_error="").delete()[0]
        if in_range.filter(received_at__gte=cutoff).exists():
            break
        low = IngestBatch.objects.filter(pk__gte=low + chunk).order_by("pk").values_list("pk", flat=True).first()
    return deleted


def import_batch_id(source_digest: str, chunk: int) -> uuid.UUID:
    """Batch ids of an imported file derive from its contents, so importing it twice changes nothing."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"gpu-governance:import:{source_digest}:{chunk}")


def usage_records_import(*, records: list, source_digest: str, chunk: int, collector: str = "import") -> Receipt:
    """An operator's import (`manage.py import_usage`): any cluster, and unknown teams and projects the records
    name are created. History may be backfilled (`ingest_window`); raises BatchInvalid."""
    batch = Batch(batch_id=import_batch_id(source_digest, chunk), collector=collector, records=records)
    batch_check(batch=batch, clusters=None, backfill=True)
    return usage_batch_store(batch=batch, body=encode(batch), source=IngestBatch.Source.IMPORT)
