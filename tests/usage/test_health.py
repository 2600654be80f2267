"""/healthz and /readyz: what a load balancer or a Kubernetes probe asks, and gg_ready on /metrics."""

import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from governance.usage.models import IngestBatch
from governance.usage.services import usage_batch_receive
from tests.factories import batch_body, sample_record

pytestmark = pytest.mark.django_db


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_healthz_answers_for_any_host_name_without_touching_the_database(client, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.get("/healthz", HTTP_HOST="10.1.2.3:8000")

    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz_is_200_with_each_check_when_the_database_broker_and_inbox_are_fine(client, settings):
    settings.CELERY_BROKER_URL = ""  # the embedded default: tasks run in-process

    response = client.get("/readyz", HTTP_HOST="10.1.2.3:8000")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert set(body["checks"]) == {"database", "broker", "inbox_backlog", "inbox_oldest_age"}
    assert body["checks"]["inbox_backlog"]["value"] == 0 and all(c["ok"] for c in body["checks"].values())


def test_readyz_is_503_when_the_broker_does_not_answer(client, settings):
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{closed_port()}/0"

    response = client.get("/readyz")

    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["broker"]["ok"] is False and checks["database"]["ok"] is True


def test_readyz_is_503_when_the_inbox_backlog_is_over_its_threshold(client, settings):
    settings.CELERY_BROKER_URL = ""
    settings.READY_INBOX_MAX_BATCHES = 1
    for n in range(2):
        usage_batch_receive(body=batch_body([sample_record(ts=f"2026-11-03T09:0{n}:00Z")]))  # stored, not processed

    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json()["checks"]["inbox_backlog"] == {"ok": False, "detail": "batches", "value": 2, "limit": 1}


def test_metrics_show_each_readiness_check_as_gg_ready(client, settings):
    settings.METRICS_TOKEN = "metrics-secret-1234"
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{closed_port()}/0"

    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer metrics-secret-1234").content.decode()

    assert 'gg_ready{check="database"} 1.0' in text
    assert 'gg_ready{check="broker"} 0.0' in text
    assert 'gg_ready{check="inbox_backlog"} 1.0' in text


def test_readyz_stays_200_with_a_dead_batch_of_any_age_which_waits_for_an_admin_not_a_worker(client, settings):
    settings.CELERY_BROKER_URL = ""
    settings.READY_INBOX_MAX_BATCHES, settings.READY_INBOX_MAX_AGE_S = 1, 900
    receipt = usage_batch_receive(body=batch_body([sample_record()]))
    IngestBatch.objects.filter(batch_id=receipt.batch_id).update(  # set aside a day ago, after its last attempt
        received_at=timezone.now() - timedelta(days=1), dead_at=timezone.now() - timedelta(days=1)
    )

    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json()["checks"]["inbox_backlog"]["value"] == 0
    assert response.json()["checks"]["inbox_oldest_age"]["value"] == 0
