"""Fuzzing the ingest endpoint as a hostile collector: no body answers 500, and a batch that got 202 is processed."""

import json
import uuid

import pytest
import time_machine
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from governance.usage.models import IngestBatch
from tests.factories import job_record, sample_record

pytestmark = pytest.mark.django_db(transaction=True)

ANSWERS = {202, 400, 409, 413}

hostile_text = st.one_of(
    st.text(max_size=80),
    st.text(alphabet=st.characters(max_codepoint=0x9F), max_size=20),  # control characters and NUL
    st.sampled_from(["", "a/b", "..", "c1\x00", "x" * 300, "c1\n", "🙂", "ml/trainer-0", "%2F", "<script>"]),
)
hostile_number = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1e308, -1e308, 2**63, 2**64, 1023, 1024, 62, 63, 100, 100.0001, 10_000, 4 * 1024**2]),
)
hostile_time = st.one_of(
    st.sampled_from(["2026-11-03T09:15:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2026-11-03", "yesterday",
                     "2026-11-03T09:15:00", "2026-11-20T12:30:00+00:00", "1970-01-01T00:00:00Z"]),
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
)  # fmt: skip
hostile_value = st.recursive(
    st.one_of(st.none(), st.booleans(), hostile_number, hostile_text, hostile_time),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(hostile_text, inner, max_size=5)),
    max_leaves=20,
)
SAMPLE_FIELDS = [*sample_record(), "mem_util", "tensor_active", "io_wait", "host_cpu_util", "pcie_rx_mibps", "extra"]
JOB_FIELDS = [*job_record(), "extra"]


@st.composite
def hostile_record(draw) -> dict:
    """A valid record with a few fields replaced by hostile values (or removed), so bounds get probed."""
    is_sample = draw(st.booleans())
    record = sample_record() if is_sample else job_record()
    fields = SAMPLE_FIELDS if is_sample else JOB_FIELDS
    for field in draw(st.lists(st.sampled_from(fields), max_size=3, unique=True)):
        if draw(st.integers(0, 9)) == 0:
            record.pop(field, None)
        else:
            record[field] = draw(hostile_value)
    return record


@st.composite
def hostile_body(draw) -> bytes:
    shape = draw(st.integers(0, 19))
    if shape == 0:
        return draw(st.binary(max_size=200))
    if shape == 1:
        depth = draw(st.integers(1_000, 100_000))
        return b"[" * depth + b"]" * depth
    if shape == 2:
        return json.dumps(draw(hostile_value), allow_nan=True).encode()
    envelope = {
        "batch_id": str(uuid.uuid4()),
        "collector": "fuzz",
        "records": draw(st.lists(hostile_record(), max_size=6)),
    }
    if shape == 3:
        envelope[draw(st.sampled_from(["batch_id", "collector", "records", "extra"]))] = draw(hostile_value)
    return json.dumps(envelope, allow_nan=True).encode()


@pytest.fixture
def at_mid_november():
    with time_machine.travel("2026-11-20T12:00:00Z", tick=False):
        yield


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=hostile_body())
def test_no_hostile_body_answers_500_and_every_accepted_batch_is_processed(client, ingest_token, at_mid_november, body):
    response = client.post(
        "/api/v1/ingest/", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {ingest_token}"
    )

    event(f"answered {response.status_code}")
    assert response.status_code in ANSWERS, response.content[:500]
    if response.status_code == 202:
        batch = IngestBatch.objects.get(batch_id=response.json()["batch_id"])
        assert batch.processed_at is not None and batch.last_error == "", batch.last_error
