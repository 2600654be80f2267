"""The claim of an inbox batch waits for a row another session holds (most often one whose worker was just killed)
instead of skipping it; it gives up after INGEST_CLAIM_LOCK_TIMEOUT_S, without counting a failed attempt."""

import threading
import time

import psycopg
import pytest
from django.db import connection

from governance.usage import services
from governance.usage.models import IngestBatch, Sample
from governance.usage.services import usage_batch_process, usage_batch_receive
from tests.factories import batch_body, sample_record

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks and lock_timeout are PostgreSQL's"),
]


@pytest.fixture
def stored(monkeypatch) -> int:
    monkeypatch.setattr(services, "_enqueue", lambda inbox_pk: None)
    receipt = usage_batch_receive(body=batch_body([sample_record()]))
    return IngestBatch.objects.get(batch_id=receipt.batch_id).pk


def other_session() -> psycopg.Connection:
    db = connection.settings_dict
    return psycopg.connect(
        host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"], password=db["PASSWORD"],
        dbname=db["NAME"],
    )  # fmt: skip


def test_a_batch_whose_row_a_dying_session_holds_is_processed_once_that_session_is_gone(stored):
    holder = other_session()
    holder.execute("SELECT 1 FROM usage_ingestbatch WHERE id = %s FOR UPDATE", [stored])
    threading.Timer(0.5, holder.close).start()  # the backend of a killed worker rolls back

    started = time.monotonic()
    result = usage_batch_process(inbox_pk=stored)

    assert result is not None and time.monotonic() - started >= 0.4
    assert IngestBatch.objects.get(pk=stored).processed_at is not None and Sample.objects.count() == 1


def test_a_batch_another_worker_finishes_while_the_claim_waits_is_not_processed_twice(stored):
    holder = other_session()
    holder.execute("UPDATE usage_ingestbatch SET processed_at = now() WHERE id = %s", [stored])
    threading.Timer(0.5, holder.commit).start()

    assert usage_batch_process(inbox_pk=stored) is None
    holder.close()


def test_the_claim_gives_up_after_the_lock_timeout_and_counts_no_failed_attempt(stored, settings):
    settings.INGEST_CLAIM_LOCK_TIMEOUT_S = 0.2
    holder = other_session()
    holder.execute("SELECT 1 FROM usage_ingestbatch WHERE id = %s FOR UPDATE", [stored])

    with pytest.raises(psycopg.errors.LockNotAvailable):
        usage_batch_process(inbox_pk=stored)
    holder.close()

    inbox = IngestBatch.objects.get(pk=stored)
    assert (inbox.processed_at, inbox.attempts, inbox.last_error) == (None, 0, "")
