"""The ingest bench's SQL reference agrees with the chargeback it is compared with."""

from decimal import Decimal

import pytest
from django.db import connection

from benchmarks.ingest import CHARGEBACK_SQL
from governance.costs.selectors import chargeback_by_team
from governance.lib.months import Month
from tests.factories import at, ingest, job_record, rate, series


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="the reference query is PostgreSQL SQL")
def test_the_hand_written_sql_reference_agrees_with_the_chargeback(cast):
    rate(price="2.50")
    start = "2026-11-03T09:00:00Z"
    ingest([
        job_record(gpus=2, submit_time=start, start_time=start, end_time="2026-11-03T11:00:00Z", state="completed"),
        *series(start=at(start), minutes=120, gpu_uuid="GPU-A"),
        *series(start=at(start), minutes=120, gpu_uuid="GPU-B", gpu_index=1),
    ])  # fmt: skip
    month = Month(2026, 11)

    with connection.cursor() as cursor:
        cursor.execute(CHARGEBACK_SQL, [month.start, month.end])
        by_sql = {team: (Decimal(hours), cost) for team, hours, cost in cursor.fetchall()}

    assert by_sql == {c.team: (c.gpu_hours, c.cost) for c in chargeback_by_team(month=month)}
    assert by_sql["NLP"] == (Decimal(4), Decimal("10.00"))
