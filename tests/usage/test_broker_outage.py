"""The broker is down when a batch arrives: 202 all the same, and the sweep has a real worker process it once."""

from datetime import timedelta

import pytest
from kombu.exceptions import OperationalError

from governance.usage import services
from governance.usage.models import GpuHour, IngestBatch, JobGpuHour, Sample
from governance.usage.services import inbox_sweep
from governance.usage.tasks import process_batch
from tests.factories import at, batch_body, job_record, series
from tests.usage.test_worker import pytestmark as worker_marks
from tests.usage.test_worker import wait_until, worker  # noqa: F401 - the fixture

pytestmark = worker_marks


def broker_down(*args, **kwargs):
    raise OperationalError("Error 111 connecting to 127.0.0.1:1. Connection refused.")


@pytest.mark.usefixtures("worker")
def test_a_batch_posted_while_the_broker_is_down_is_stored_and_processed_once_by_the_sweep(
    client, ingest_token, monkeypatch
):
    records = [job_record(), *series(start=at("2026-11-03T09:15:00Z"), minutes=30, sm_util=40.0)]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ingest_token}"}
    monkeypatch.setattr(services, "_broker_down_until", 0.0)  # the pause after the failure ends with the test
    with monkeypatch.context() as patch:
        patch.setattr(process_batch, "apply_async", broker_down)
        response = client.post("/api/v1/ingest/", data=batch_body(records), content_type="application/json", **auth)

    assert response.status_code == 202
    assert IngestBatch.objects.get().processed_at is None and Sample.objects.count() == 0

    # Two sweeps enqueue the batch twice (as overlapping beat runs would); it must still count once.
    assert inbox_sweep(older_than=timedelta(0)) == 1
    assert inbox_sweep(older_than=timedelta(0)) == 1
    wait_until(lambda: IngestBatch.objects.filter(processed_at__isnull=False).exists())
    wait_until(lambda: not _in_flight())  # both messages taken and acknowledged: the second run is over

    inbox = IngestBatch.objects.get()
    assert (inbox.attempts, inbox.last_error) == (1, "")
    assert Sample.objects.count() == 30
    assert sum(JobGpuHour.objects.values_list("samples", flat=True)) == 30
    assert sum(GpuHour.objects.values_list("samples", flat=True)) == 30
    assert inbox_sweep(older_than=timedelta(0)) == 0


def _in_flight() -> int:
    """Messages waiting in the ingest queue or delivered but not acknowledged (kombu's `unacked` hash)."""
    import redis
    from django.conf import settings

    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    return broker.llen("ingest") + broker.hlen("unacked")
