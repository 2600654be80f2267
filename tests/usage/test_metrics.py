"""/metrics: Prometheus text for the autoscaler and Grafana, behind METRICS_TOKEN."""

import os
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from governance.costs.services import capacity_set
from governance.fleet.models import Cluster
from governance.usage.models import PricingMark
from governance.usage.services import usage_batch_receive
from tests.factories import H100, at, batch_body, committed, ingest, job_record, rate, series
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db

TOKEN = "metrics-secret-1234"


def scrape(client, token: str | None = TOKEN):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.get("/metrics", **headers)


def value(text: str, line_start: str) -> float:
    for line in text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{line_start} not in:\n{text}")


def test_metrics_are_off_until_a_token_is_set(client, settings):
    settings.METRICS_TOKEN = ""

    assert scrape(client).status_code == 404


def test_metrics_refuse_a_wrong_token(client, settings):
    settings.METRICS_TOKEN = TOKEN

    assert scrape(client, token="guess").status_code == 401
    assert scrape(client, token=None).status_code == 401


@time_machine.travel("2026-11-03T12:00:00Z", tick=False)
def test_metrics_show_backlog_lag_samples_and_the_cost_per_team_this_month(client, settings, cast):
    settings.METRICS_TOKEN = TOKEN
    rate(price="2.00")
    with committed():  # the cluster has the two GPUs its job holds (samples show one)
        capacity_set(cluster="c1", gpu_model=H100, count=2, valid_from=at("2026-01-01T00:00:00Z"))
    job = job_record(start_time="2026-11-03T10:00:00Z", gpus=2)
    ingest([job, *series(start=at("2026-11-03T11:00:00Z"), minutes=50)])
    usage_batch_receive(body=batch_body(series(start=at("2026-11-03T11:50:00Z"), minutes=3)))  # stored, not processed

    response = scrape(client)

    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    assert value(text, "gg_inbox_backlog_batches") == 1
    assert value(text, "gg_inbox_backlog_records") == 3
    assert value(text, "gg_ingest_lag_seconds") == 11 * 60  # newest sample 11:49, now 12:00
    assert value(text, "gg_samples_ingested_recent") == 50
    assert value(text, 'gg_team_cost_month{currency="USD",team="NLP"}') == 8.0  # 2 GPUs x 2 h x 2.00
    assert_billing_invariants()


@pytest.mark.skipif(not os.environ.get("CELERY_BROKER_URL", "").startswith("redis"), reason="needs a Redis broker")
def test_metrics_show_the_depth_of_each_celery_queue(client, settings):
    import redis

    settings.METRICS_TOKEN = TOKEN
    settings.CELERY_BROKER_URL = os.environ["CELERY_BROKER_URL"]
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    queue = "analysis"
    before = broker.llen(queue)
    broker.rpush(queue, b"not-a-task-1", b"not-a-task-2")
    try:
        text = scrape(client).content.decode()
    finally:
        broker.lrem(queue, 0, b"not-a-task-1")
        broker.lrem(queue, 0, b"not-a-task-2")
    assert value(text, 'gg_celery_queue_depth{queue="analysis"}') == before + 2
    assert 'gg_celery_queue_depth{queue="ingest"}' in text


def test_metrics_show_the_pricing_lag_from_the_oldest_day_waiting_to_be_priced(client, settings, cast):
    settings.METRICS_TOKEN = TOKEN
    cluster = Cluster.objects.create(name="c1")
    PricingMark.objects.create(
        cluster=cluster, day=timezone.now().date(), created_at=timezone.now() - timedelta(minutes=10)
    )
    PricingMark.objects.create(cluster=cluster, day=timezone.now().date())  # stamped by the database

    text = scrape(client).content.decode()

    assert value(text, "gg_pricing_marks_pending") == 2
    assert 600 <= value(text, "gg_pricing_lag_seconds") < 660
    assert value(text, "gg_pricing_failures") == 0
    assert value(text, "gg_inbox_dead_batches") == 0
