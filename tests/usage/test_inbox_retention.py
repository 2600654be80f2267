"""Processed inbox batches go after INBOX_RETENTION_DAYS; unprocessed and failed ones stay."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from governance.usage.models import IngestBatch
from governance.usage.services import inbox_purge, inbox_sweep
from governance.usage.tasks import purge_inbox
from tests.factories import batch_body, sample_record

pytestmark = pytest.mark.django_db


def inbox(n: int, *, days_ago: float, processed: bool = True, error: str = "") -> list[int]:
    when = timezone.now() - timedelta(days=days_ago)
    rows = [
        IngestBatch.objects.create(
            batch_id=uuid.uuid4(), collector="t", body=b"{}", body_sha256="x",
            record_count=1, processed_at=when if processed else None, last_error=error,
        )
        for i in range(n)
    ]  # fmt: skip
    IngestBatch.objects.filter(pk__in=[r.pk for r in rows]).update(received_at=when)
    return [r.pk for r in rows]


def test_processed_batches_older_than_retention_are_deleted_in_ranges_and_the_rest_stay():
    old = inbox(7, days_ago=10)
    waiting = inbox(1, days_ago=10, processed=False)
    failed = inbox(1, days_ago=10, error="OperationalError('disk full')")
    recent = inbox(2, days_ago=1)

    assert inbox_purge(older_than=timedelta(days=7), chunk=3) == len(old)

    assert set(IngestBatch.objects.values_list("pk", flat=True)) == {*waiting, *failed, *recent}
    assert inbox_purge(older_than=timedelta(days=7), chunk=3) == 0


def test_the_retention_task_keeps_everything_when_retention_is_zero(settings):
    inbox(2, days_ago=30)
    settings.INBOX_RETENTION_DAYS = 0
    assert purge_inbox() == 0 and IngestBatch.objects.count() == 2

    settings.INBOX_RETENTION_DAYS = 7
    assert purge_inbox() == 2 and IngestBatch.objects.count() == 0


def test_the_retention_task_runs_daily_and_the_sweep_every_15_seconds(settings):
    assert settings.CELERY_BEAT_SCHEDULE["purge-ingest-inbox"] == {"task": "usage.purge_inbox", "schedule": 86400.0}
    assert settings.CELERY_BEAT_SCHEDULE["sweep-ingest-inbox"]["schedule"] == 15.0


def test_the_sweep_enqueues_only_batches_unprocessed_for_longer_than_its_age(monkeypatch):
    from governance.usage import services

    sent = []
    monkeypatch.setattr(services, "_publish", sent.append)
    stale = inbox(2, days_ago=1, processed=False)
    services.usage_batch_receive(body=batch_body([sample_record()]))  # just stored

    assert inbox_sweep(older_than=timedelta(seconds=30)) == 2 and sent == stale
