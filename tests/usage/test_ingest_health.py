"""Issue 31 item 7: the ingest health page (per cluster and node, per collector, the inbox) and the announcement of a
collector gone silent, once per silence, through the notification outbox; all through the real ingest path."""

from datetime import timedelta

import pytest
import time_machine
from django.test import TestCase
from django.utils import timezone

from governance.notify.models import OutboxMessage
from governance.org.models import User
from governance.usage.collectors import collectors_check
from governance.usage.ingest_health import ingest_health
from governance.usage.models import IngestBatch, PricingMark
from governance.usage.services import usage_batch_process
from tests.factories import batch_body, iso, priced, sample_record

pytestmark = pytest.mark.django_db
HOOK = "https://hooks.example.org/ops"


@pytest.fixture(autouse=True)
def _silence_after_five_minutes(settings):
    settings.INGEST_COLLECTOR_INTERVAL_S = 60
    settings.INGEST_SILENT_INTERVALS = 5
    settings.GOVERNANCE_NOTIFY_DESTINATIONS = [HOOK]


def send(client, token: str, node: str, readings: int = 3, *, process: bool = True) -> None:
    """A collector on `node` sends `readings` samples of its GPU, the last a minute ago, through the ingest API."""
    now = timezone.now()
    records = [
        sample_record(node=node, gpu_uuid=f"GPU-{node}", ts=iso(now - timedelta(minutes=readings - i)), sm_util=50.0)
        for i in range(readings)
    ]
    with TestCase.captureOnCommitCallbacks(execute=process):
        response = client.post("/api/v1/ingest/", data=batch_body(records, collector=f"simulate@{node}"),
                               content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")  # fmt: skip
    assert response.status_code == 202, response.content


def announced(collector: str) -> list[OutboxMessage]:
    return list(OutboxMessage.objects.filter(event="collector.silent", payload__collector=collector))


def test_a_collector_silent_for_five_intervals_is_announced_once_and_again_after_it_returns(client, cast, ingest_token):
    cast.admin.email = "ops@example.org"
    cast.admin.save()
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        send(client, ingest_token, "node-a")
        assert collectors_check() == []
    with time_machine.travel(start + timedelta(minutes=10), tick=False):
        send(client, ingest_token, "node-b")
        first = collectors_check()
        again = collectors_check()
    with time_machine.travel(start + timedelta(minutes=12), tick=False):
        send(client, ingest_token, "node-a")  # back
        back = collectors_check()
    with time_machine.travel(start + timedelta(minutes=30), tick=False):
        later = collectors_check()

    assert first == ["simulate@node-a"] and again == [] and back == []
    assert later == ["simulate@node-a", "simulate@node-b"]
    messages = announced("simulate@node-a")
    destinations = [m.destination for m in messages]
    assert sorted(destinations) == sorted(["mailto://ops@example.org", HOOK] * 2)  # once per silence, two silences
    assert "simulate@node-a has sent nothing since" in messages[0].text


def test_the_ingest_health_page_shows_the_silent_collector_and_each_cluster_and_node(client, cast, ingest_token):
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        send(client, ingest_token, "node-a", readings=4)
    with time_machine.travel(start + timedelta(minutes=10), tick=False):
        send(client, ingest_token, "node-b", readings=2)
        collectors_check()
        health = ingest_health()
        client.force_login(User.objects.create_superuser("root", password="pw-root-1234"))
        page = client.get("/admin/usage/collectorstatus/")

    assert [(c.collector, c.silent) for c in health.collectors] == [("simulate@node-a", True),
                                                                   ("simulate@node-b", False)]  # fmt: skip
    assert [(n.name, n.samples_last_hour) for n in health.nodes] == [("node-a", 4), ("node-b", 2)]
    (cluster,) = health.clusters
    assert (cluster.name, cluster.nodes, cluster.gpus, cluster.samples_last_hour) == ("c1", 2, 2, 6)
    assert page.status_code == 200
    body = page.content.decode()
    assert "Ingest health" in body and "simulate@node-a" in body and "<strong>silent</strong>" in body
    assert body.count("<strong>silent</strong>") == 2  # node-a's collector and node-a itself; node-b reports


def test_the_lag_to_pricing_is_the_age_of_the_oldest_day_waiting_and_none_once_priced(client, cast, ingest_token):
    with TestCase.captureOnCommitCallbacks(execute=False):  # stored and processed; the pricing pass not yet run
        send(client, ingest_token, "node-a", process=False)
        usage_batch_process(inbox_pk=IngestBatch.objects.get().pk)
    waiting = ingest_health().clusters[0]
    priced()
    done = ingest_health().clusters[0]

    assert PricingMark.objects.count() == 0
    assert waiting.unpriced_marks > 0 and waiting.pricing_lag is not None and waiting.pricing_lag >= timedelta(0)
    assert done.unpriced_marks == 0 and done.pricing_lag is None


def test_the_page_is_for_admins_only_and_linked_from_the_inbox(client, cast):
    client.force_login(cast.alice)
    refused = client.get("/admin/usage/collectorstatus/")
    client.force_login(User.objects.create_superuser("root", password="pw-root-1234"))
    inbox = client.get("/admin/usage/ingestbatch/").content.decode()

    assert refused.status_code == 302  # to the admin's sign-in
    assert 'href="/admin/usage/collectorstatus/"' in inbox and "Ingest health" in inbox
