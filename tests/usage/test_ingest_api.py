import gzip

import pytest
from django.urls import reverse

from governance.api.models import ApiToken
from governance.usage.models import IngestBatch, Job, Sample
from tests.factories import batch_body, job_record, sample_record

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/api/v1/ingest/"


def post(client, body: bytes, token: str | None, **headers):
    extra = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    extra.update(headers)
    return client.post(URL, data=body, content_type="application/json", **extra)


def test_it_accepts_a_batch_with_202_and_processes_it(client, ingest_token):
    response = post(client, batch_body([job_record(), sample_record()]), ingest_token)

    assert response.status_code == 202
    assert response.json()["records"] == 2
    assert IngestBatch.objects.get().processed_at is not None
    assert Sample.objects.count() == 1


def test_the_same_batch_posted_twice_is_stored_once(client, ingest_token):
    body = batch_body([job_record(), sample_record()])
    post(client, body, ingest_token)
    again = post(client, body, ingest_token)

    assert again.status_code == 202 and again.json()["duplicate"] is True
    assert (IngestBatch.objects.count(), Sample.objects.count()) == (1, 1)


def test_a_malformed_batch_gets_400_naming_each_bad_record_and_writes_nothing(client, ingest_token):
    body = batch_body(
        [job_record(), sample_record(ts="yesterday"), job_record(gpus=-1), sample_record(power_w=None, node=None)]
    )

    response = post(client, body, ingest_token)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_records"
    assert [(d["index"], d["field"]) for d in error["details"]] == [(1, "ts"), (2, "gpus"), (3, "node")]
    assert all(d["reason"] for d in error["details"])
    assert (IngestBatch.objects.count(), Job.objects.count(), Sample.objects.count()) == (0, 0, 0)


def test_a_body_that_is_not_json_gets_400(client, ingest_token):
    response = post(client, b"{not json", ingest_token)

    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["index"] is None


def test_it_accepts_a_gzip_body(client, ingest_token):
    body = gzip.compress(batch_body([job_record()]))

    response = post(client, body, ingest_token, HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 202
    assert Job.objects.count() == 1


def test_a_body_over_the_limit_gets_413(client, ingest_token, settings):
    settings.INGEST_MAX_BODY_BYTES = 1000
    body = gzip.compress(batch_body([sample_record(ts=f"2026-11-03T09:{m:02d}:00Z") for m in range(30)]))

    response = post(client, body, ingest_token, HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 413
    assert "larger than 1000 bytes" in response.json()["error"]["message"]
    assert IngestBatch.objects.count() == 0


def test_ingest_needs_a_token(client, cast):
    assert post(client, batch_body([job_record()]), None).status_code == 401


def test_a_read_token_cannot_ingest(client, read_token):
    assert post(client, batch_body([job_record()]), read_token).status_code == 403


def test_a_revoked_token_is_refused(client, ingest_token):
    ApiToken.objects.get().revoke()

    assert post(client, batch_body([job_record()]), ingest_token).status_code == 401


def test_an_ingest_token_cannot_read_the_chargeback(client, ingest_token):
    response = client.get(reverse("v1:chargeback"), {"month": "2026-11"}, HTTP_AUTHORIZATION=f"Bearer {ingest_token}")

    assert response.status_code == 403


def test_the_api_root_answers(client):
    response = client.get("/api/v1/")

    assert response.status_code == 200
    assert response.json()["ingest"].endswith("/api/v1/ingest/")
