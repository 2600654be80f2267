"""The inbox: store a received batch (binary on PostgreSQL) and claim it for processing."""

from __future__ import annotations

import gc
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import NamedTuple

import psycopg
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from governance.api.models import ApiToken
from governance.usage.models import IngestBatch

logger = logging.getLogger(__name__)

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


# Counts an attempt in a statement of its own, committed before the work starts: a worker that dies in the middle
# of a batch (killed, out of memory, a crash in native code) cannot take the count down with its transaction. Until
# the attempt ends, the batch's error says it did not finish. A batch whose attempts reached the limit is set aside
# as dead instead of tried again. A row another session holds is waited for, up to the lock timeout: that session
# is most often one whose worker was killed, and its lock goes with it within a second or so. When it commits
# instead, the row no longer matches and nothing is counted.
#
# A batch another worker has taken into its group (inbox_attempt_start_more) is that worker's until the group is
# written or given up: its own task finds the group's lock on it and does nothing (the group counted its attempt
# already). Were that worker to die, the lock goes with its session and the inbox sweep brings the batch back. The
# lock is tried once, on this batch's id (an uncorrelated subquery): a condition on the row would be tried on every
# row a sequential scan reads.
GROUP_LOCK_SPACE = 7801  # advisory locks, the space of ingest groups (governance/costs/locks.py holds 77xx)


def _group_lock_key(id_sql: str) -> str:
    """A batch's key in GROUP_LOCK_SPACE, from the SQL of its id (advisory keys are int4)."""
    return f"({id_sql} %% 2147483648)::int4"


INBOX_ATTEMPT = f"""
UPDATE usage_ingestbatch SET
    attempts = attempts + CASE WHEN attempts < %(limit)s THEN 1 ELSE 0 END,
    dead_at = CASE WHEN attempts >= %(limit)s THEN %(now)s END,
    last_error = CASE WHEN attempts >= %(limit)s THEN last_error ELSE %(unfinished)s END
WHERE id = %(id)s AND processed_at IS NULL AND dead_at IS NULL
    AND (SELECT pg_try_advisory_xact_lock({GROUP_LOCK_SPACE}, {_group_lock_key("%(id)s")}))
RETURNING dead_at IS NULL
"""
ATTEMPT_UNFINISHED = "an attempt did not finish: its worker died (killed, out of memory, crashed) or lost the database"


class Attempt(StrEnum):
    STARTED = "started"  # counted and committed: process the batch now
    DEAD = "dead"  # its attempts reached INGEST_MAX_ATTEMPTS: set aside now
    NONE = "none"  # processed already, dead already, or unknown: nothing to do


def inbox_attempt_start(inbox_pk: int) -> Attempt:
    """Count an attempt at an unprocessed, live batch and commit the count before the batch is processed, or set
    the batch aside as dead when INGEST_MAX_ATTEMPTS attempts have already started. Raises
    psycopg.errors.LockNotAvailable when another session holds the batch for longer than
    INGEST_CLAIM_LOCK_TIMEOUT_S (the task retries it; nothing is counted)."""
    limit, now = settings.INGEST_MAX_ATTEMPTS, timezone.now()
    if connection.vendor != "postgresql":
        with transaction.atomic():
            live = IngestBatch.objects.select_for_update().filter(pk=inbox_pk, processed_at__isnull=True)
            inbox = live.filter(dead_at__isnull=True).first()
            if inbox is None:
                return Attempt.NONE
            if inbox.attempts >= limit:
                inbox.dead_at = now
                inbox.save(update_fields=["dead_at"])
                return Attempt.DEAD
            inbox.attempts, inbox.last_error = inbox.attempts + 1, ATTEMPT_UNFINISHED
            inbox.save(update_fields=["attempts", "last_error"])
            return Attempt.STARTED
    params = {"limit": limit, "now": now, "unfinished": ATTEMPT_UNFINISHED, "id": inbox_pk}
    with transaction.atomic():  # its own transaction, committed here (a savepoint inside a caller's transaction)
        connection.ensure_connection()
        with connection.connection.pipeline(), psycopg.Cursor(connection.connection) as cursor:
            # No wait for the WAL flush: a count that a database crash loses only gives the batch one more try.
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
            cursor.execute(f"SET LOCAL lock_timeout = {int(settings.INGEST_CLAIM_LOCK_TIMEOUT_S * 1000)}")
            cursor.execute(INBOX_ATTEMPT, params)
            row = cursor.fetchone()
    if row is None:
        return Attempt.NONE
    return Attempt.STARTED if row[0] else Attempt.DEAD


class Claimed(NamedTuple):
    """A claimed inbox batch, and who sent it: its token's name, user id and user name (empty and None when it came
    through no token, an import, or its token is gone), for the audit door of what it changes; `pk`, its inbox
    row."""

    format: str
    body: bytes
    source: str
    batch_id: uuid.UUID
    token_id: int | None
    token_name: str
    user_id: int | None
    user_name: str
    pk: int


# Claims the batch whose attempt was counted, marks it processed and returns its body and who sent it, in one round
# trip; a rollback of the processing transaction undoes the mark (never the count). When another session processed
# it in the meantime, the row no longer matches and the claim returns nothing.
INBOX_CLAIM = """
UPDATE usage_ingestbatch b SET processed_at = %s, last_error = ''
WHERE b.id = %s AND b.processed_at IS NULL AND b.dead_at IS NULL
RETURNING b.format, b.body, b.source, b.batch_id, b.token_id,
    coalesce((SELECT t.name FROM {token} t WHERE t.id = b.token_id), ''),
    (SELECT t.user_id FROM {token} t WHERE t.id = b.token_id),
    coalesce((SELECT u.{username} FROM {token} t JOIN {user} u ON u.id = t.user_id WHERE t.id = b.token_id), ''),
    b.id
"""


def _claim_statement() -> str:
    user = get_user_model()
    return INBOX_CLAIM.format(token=ApiToken._meta.db_table, user=user._meta.db_table, username=user.USERNAME_FIELD)


def inbox_claim(inbox_pk: int) -> Claimed | None:
    """An unprocessed inbox batch whose attempt `inbox_attempt_start` counted, now marked processed in the current
    transaction; None when it is processed already or dead. Raises psycopg.errors.LockNotAvailable when another
    session holds the batch for longer than INGEST_CLAIM_LOCK_TIMEOUT_S (the task retries it).

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
        inbox.last_error = ""
        inbox.save(update_fields=["processed_at", "last_error"])
        token = None
        if inbox.token_id is not None:
            token = ApiToken.objects.filter(pk=inbox.token_id).select_related("user").first()
        name, user_id, user_name = (token.name, token.user_id, token.user.get_username()) if token else ("", None, "")
        return Claimed(inbox.format, bytes(inbox.body), inbox.source, inbox.batch_id, inbox.token_id, name, user_id,
                       user_name, inbox.pk)  # fmt: skip
    # All three statements in one round trip (pipeline mode); binary: the body comes back as its bytes.
    with connection.connection.pipeline(), psycopg.Cursor(connection.connection) as cursor:
        cursor.execute("SET LOCAL synchronous_commit TO OFF")
        cursor.execute(f"SET LOCAL lock_timeout = {int(settings.INGEST_CLAIM_LOCK_TIMEOUT_S * 1000)}")
        cursor.execute(_claim_statement(), [timezone.now(), inbox_pk], binary=True)
        row = cursor.fetchone()
    return None if row is None else Claimed(*row)


# The batches waiting behind a batch whose first attempt just started, that the same transaction may write with it
# (PostgreSQL), as many as fit in INGEST_COALESCE_RECORDS records with it: stored in the same format by the same token
# through the same door, never tried before, and not held by another worker (SKIP LOCKED: no wait). Oldest first. Their
# attempts are counted and committed before the work starts, as the leader's is: a worker that dies in the middle of a
# group has counted one on each batch of it, so a batch that kills its worker reaches INGEST_MAX_ATTEMPTS as surely in a
# group as alone, and every batch tried once goes alone from then on. The leader qualifies only on its first attempt,
# with room, and prepared. Each batch counted is held by this session's advisory lock (GROUP_LOCK_SPACE) until
# `inbox_group_released`: between this commit and the claim, its own task would otherwise count a second attempt and
# write it alone.
INBOX_ATTEMPT_MORE = f"""
WITH leader AS (
    SELECT id, format, source, token_id, record_count FROM usage_ingestbatch
    WHERE id = %(leader)s AND attempts = 1 AND record_count < %(records)s AND format = %(format)s
), waiting AS (
    SELECT b.id, b.received_at, b.record_count FROM usage_ingestbatch b JOIN leader l ON b.format = l.format
        AND b.source = l.source AND b.token_id IS NOT DISTINCT FROM l.token_id AND b.id <> l.id
    WHERE b.processed_at IS NULL AND b.dead_at IS NULL AND b.attempts = 0
        AND b.record_count <= %(records)s - l.record_count
    ORDER BY b.received_at, b.id LIMIT %(limit)s FOR NO KEY UPDATE OF b SKIP LOCKED
), more AS MATERIALIZED (  -- as many of them, in order, as the group's records allow (only they get locked)
    SELECT w.id FROM (SELECT id, sum(record_count) OVER (ORDER BY received_at, id) AS records FROM waiting) w
    JOIN leader l ON w.records <= %(records)s - l.record_count
), locked AS (  -- on the rows of `more` only: a CTE with a volatile function is never folded into the UPDATE
    SELECT id FROM more WHERE pg_try_advisory_lock({GROUP_LOCK_SPACE}, {_group_lock_key("id")})
)
UPDATE usage_ingestbatch b SET attempts = b.attempts + 1, last_error = %(unfinished)s
FROM locked WHERE b.id = locked.id
RETURNING b.id
"""


def inbox_attempt_start_more(leader_pk: int, *, limit: int, max_records: int) -> list[int]:
    """Count and commit an attempt on up to `limit` batches to write with the batch `leader_pk`, whose first attempt
    `inbox_attempt_start` started, all of them together holding at most `max_records` records: none unless that
    batch is prepared and has room. Their ids, oldest first; `inbox_claim_more` claims them. PostgreSQL only
    (elsewhere: none)."""
    if limit <= 0 or connection.vendor != "postgresql":
        return []
    params = {"leader": leader_pk, "records": max_records, "format": IngestBatch.Format.PREPARED.value,
              "limit": limit, "unfinished": ATTEMPT_UNFINISHED}  # fmt: skip
    with transaction.atomic():  # its own transaction, committed here, like the leader's count
        connection.ensure_connection()
        with connection.connection.pipeline(), psycopg.Cursor(connection.connection) as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
            cursor.execute(INBOX_ATTEMPT_MORE, params)
            rows = cursor.fetchall()
    return sorted(pk for (pk,) in rows)


GROUP_RELEASE = f"SELECT pg_advisory_unlock({GROUP_LOCK_SPACE}, {_group_lock_key('id')}) FROM unnest(%s::int8[]) AS id"


def inbox_group_released(pks: list[int]) -> None:
    """Let go of the batches `inbox_attempt_start_more` counted (written, or given up: their own tasks may take
    them from now on)."""
    if not pks or connection.vendor != "postgresql":
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute(GROUP_RELEASE, [pks])
    except DatabaseError:  # the session is gone, and its locks with it (or the caller's transaction is broken)
        logger.warning("could not release ingest batches %s", pks, exc_info=True)


# Claims the batches whose attempts `inbox_attempt_start_more` counted, in the processing transaction: those another
# worker took meanwhile (processed, or held: SKIP LOCKED) are left out.
INBOX_CLAIM_MORE = """
UPDATE usage_ingestbatch b SET processed_at = %(now)s, last_error = ''
FROM (
    SELECT id FROM usage_ingestbatch WHERE id = ANY(%(ids)s) AND processed_at IS NULL AND dead_at IS NULL
    ORDER BY id FOR NO KEY UPDATE SKIP LOCKED
) more
WHERE b.id = more.id
RETURNING b.id, b.body, b.batch_id
"""


def inbox_claim_more(leader: Claimed, pks: list[int]) -> list[Claimed]:
    """The batches `pks` (of `leader`'s token, source and format), marked processed in the current transaction to
    be written with `leader`, oldest first; a rollback undoes the marks (never the counts)."""
    if not connection.in_atomic_block:
        raise RuntimeError("inbox_claim_more must run inside the transaction that processes the batches")
    if not pks:
        return []
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(INBOX_CLAIM_MORE, {"now": timezone.now(), "ids": pks}, binary=True)
        rows = sorted(cursor.fetchall())  # in the order they arrived (ids grow with it)
    return [leader._replace(pk=pk, body=body, batch_id=batch_id) for pk, body, batch_id in rows]


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
