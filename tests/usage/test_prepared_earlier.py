"""A prepared payload an earlier release stored (its rows without the readings added since) is still written after
an upgrade: the columns it carries as they were, the new ones unknown."""

import os

import pytest
from django.db import connection, transaction
from psycopg.copy import Copy

from collectors.records import decode_batch
from governance.usage import prepared
from governance.usage.models import JobGpuHour, Sample
from governance.usage.services import usage_prepared_write
from tests.factories import at, batch_body, job_record, series

pytestmark = [
    pytest.mark.skipif(not os.environ.get("DATABASE_URL"), reason="the prepared inbox is PostgreSQL's"),
    pytest.mark.django_db(transaction=True),
]


def earlier_payload(batch: prepared.Prepared, magic: bytes, readings: int) -> bytes:
    """What prepared.encode wrote in the release of `magic`: rows of the first `readings` readings."""
    header = prepared._header_encoder.encode(batch.header)
    writer = prepared._Collect()
    writer.write(magic + prepared._HEADER_LENGTH.pack(len(header)) + header)
    width = 3 + readings
    with (
        prepared.psycopg.Cursor(connection.connection) as cursor,
        Copy(cursor, binary=True, writer=writer) as copy,
    ):
        copy.set_types(prepared.STAGE_TYPES[:width])
        assert not isinstance(batch.rows, memoryview)
        for row in batch.rows:
            copy.write_row(row[:width])
    return writer.getvalue()


def test_a_ggp1_payload_writes_its_samples_and_rollups_with_the_jobs_own_sm_unknown():
    records = [job_record(), *series(start=at("2026-11-03T09:00:00Z"), minutes=5, sm_util=40.0, job_sm_util=10.0)]
    batch = prepared.prepare(decode_batch(batch_body(records)))
    connection.ensure_connection()
    payload = earlier_payload(batch, b"GGP1", prepared.EARLIER[b"GGP1"])

    decoded = prepared.decode(payload)
    assert decoded.readings == 14
    with transaction.atomic():
        usage_prepared_write(batch=decoded, create_projects=True)

    assert Sample.objects.count() == 5 and not Sample.objects.filter(job_sm_util__isnull=False).exists()
    (hour,) = JobGpuHour.objects.all()
    assert (hour.samples, hour.sm_sum, hour.job_sm_samples) == (5, 200.0, 0)


def test_the_current_payload_keeps_the_jobs_own_sm():
    records = [job_record(), *series(start=at("2026-11-03T09:00:00Z"), minutes=5, sm_util=40.0, job_sm_util=10.0)]
    batch = prepared.prepare(decode_batch(batch_body(records)))
    connection.ensure_connection()

    with transaction.atomic():
        usage_prepared_write(batch=prepared.decode(prepared.encode(batch, connection.connection)),
                             create_projects=True)  # fmt: skip

    (hour,) = JobGpuHour.objects.all()
    assert (hour.samples, hour.job_sm_samples, hour.job_sm_sum) == (5, 5, 50.0)
