"""The bench command: what it discovers, where it refuses to run, and that its SQL reference agrees."""

from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from governance.costs.selectors import chargeback_by_team
from governance.lib.months import Month
from governance.usage.bench import CHARGEBACK_SQL
from governance.usage.management.commands.bench import bench_modules
from tests.factories import at, ingest, job_record, rate, series


def test_it_runs_the_ingest_bench_first_then_every_area_that_has_one():
    modules = bench_modules()

    assert modules[0] == "governance.usage.bench"
    assert all(name.endswith(".bench") for name in modules)


@pytest.mark.skipif(connection.vendor == "postgresql", reason="checks the refusal on SQLite")
def test_it_refuses_to_run_on_sqlite():
    with pytest.raises(CommandError, match="PostgreSQL"):
        call_command("bench")


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
