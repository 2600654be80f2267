"""The outage test through the real path: HTTP to a live server, a real Celery worker on a real broker."""

import os

import pytest

from collectors.sender import Sender
from governance.usage.models import IngestBatch, Sample
from tests.collectors.test_agent import closed_port_url, make_agent
from tests.usage.test_worker import wait_until
from tests.usage.test_worker import worker as worker  # the real worker fixture, shared

pytestmark = [
    pytest.mark.worker,
    pytest.mark.skipif(not os.environ.get("CELERY_BROKER_URL"), reason="needs CELERY_BROKER_URL (a real Redis)"),
    pytest.mark.skipif(not os.environ.get("DATABASE_URL"), reason="needs DATABASE_URL (PostgreSQL)"),
    pytest.mark.django_db(transaction=True),
]


def test_records_spooled_during_an_outage_reach_postgres_exactly_once_through_the_worker(
    tmp_path, live_server, ingest_token, worker
):
    agent = make_agent(tmp_path, closed_port_url(), token=ingest_token)
    for _ in range(3):
        agent.sample()
    assert agent.counters.spooled == agent.counters.read and agent.counters.sent == 0

    agent.sender = Sender(live_server.url, ingest_token, attempts=2, backoff=0.01)
    agent.sample()
    wait_until(lambda: IngestBatch.objects.filter(processed_at__isnull=True).count() == 0 and Sample.objects.count())
    wait_until(lambda: not IngestBatch.objects.filter(processed_at__isnull=True).exists())

    assert agent.counters.sent == agent.counters.read and agent.spool.batches() == []
    assert IngestBatch.objects.count() == 4
    assert Sample.objects.count() == 4 * 8
