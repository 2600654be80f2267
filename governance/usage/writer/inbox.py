"""The inbox: store a received batch (binary on PostgreSQL) and claim it for processing."""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from django.conf import settings
from django.db import IntegrityError, connection
from django.utils import timezone

from governance.usage.models import IngestBatch

# Django's PostgreSQL cursors bind parameters client-side, which writes a batch body into the SQL text
# as hex (twice its size, parsed again by the server). A plain psycopg cursor on the same connection and
# transaction sends and reads it as binary: an inbox write then costs what its bytes cost.
INBOX_INSERT = """
INSERT INTO usage_ingestbatch (batch_id, collector, source, format, body, body_sha256, record_count, received_at,
    token_id, attempts, last_error)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 0, '') RETURNING id
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
    token_id: int | None = None,
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
            token_id=token_id,
        ).pk
    connection.ensure_connection()
    try:
        with psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(
                INBOX_INSERT,
                [batch_id, collector, source, format, body, body_sha256, record_count, timezone.now(), token_id],
            )
            row = cursor.fetchone()
            assert row is not None  # INSERT ... RETURNING returns the row it wrote
            return row[0]
    except psycopg.IntegrityError as exc:
        raise IntegrityError(str(exc)) from exc


# Claims an unprocessed, live batch, marks it processed and returns its body, in one round trip; a rollback of the
# processing transaction undoes the mark. A row another session holds is waited for, up to the lock timeout:
# that session is most often one whose worker was killed, and its lock goes with it within a second or so. When
# it commits instead, the row no longer matches and the claim returns nothing.
INBOX_CLAIM = """
UPDATE usage_ingestbatch SET processed_at = %s, attempts = attempts + 1, last_error = ''
WHERE id = %s AND processed_at IS NULL AND dead_at IS NULL
RETURNING format, body, source, token_id
"""


def inbox_claim(inbox_pk: int) -> tuple[str, bytes, str, int | None] | None:
    """(format, body, source, token id) of an unprocessed inbox batch, now marked processed in the current transaction;
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
        return inbox.format, bytes(inbox.body), inbox.source, inbox.token_id
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
