"""Sample partitions by month or by day, created ahead and on demand, and retention that drops whole ones."""

from decimal import Decimal

import pytest
import time_machine
from django.core.management import call_command
from django.db import connection

from governance.costs.selectors import chargeback_by_team
from governance.lib.months import Month
from governance.usage import partitions
from governance.usage.models import GpuHour, JobGpuHour, Sample
from tests.factories import at, ingest, job_record, rate, series

pytestmark = pytest.mark.django_db
postgres_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="partitions are PostgreSQL's; SQLite keeps a plain table"
)


def rows_in(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")
        return cursor.fetchone()[0]


@postgres_only
def test_the_sample_table_is_partitioned_by_month_with_a_brin_index_on_ts_and_one_unique_gpu_ts_index():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT am.amname, pg_get_indexdef(i.indexrelid) FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam"
            " WHERE i.indrelid = 'usage_sample'::regclass ORDER BY am.amname"
        )
        indexes = cursor.fetchall()
    assert [am for am, _ in indexes] == ["brin", "btree"]
    assert "(ts)" in indexes[0][1] and "UNIQUE" in indexes[1][1] and "(gpu_id, ts)" in indexes[1][1]
    assert partitions.is_partitioned()


@postgres_only
def test_samples_keep_distinct_ids_without_a_primary_key_constraint():
    ingest(series(start=at("2026-11-03T09:00:00Z"), minutes=5))
    ingest(series(start=at("2026-11-03T10:00:00Z"), minutes=5))

    ids = list(Sample.objects.values_list("id", flat=True))
    assert len(ids) == len(set(ids)) == 10
    assert Sample.objects.get(pk=ids[0]).pk == ids[0]


@postgres_only
@time_machine.travel("2031-05-15T12:00:00Z", tick=False)
def test_ensure_creates_this_month_and_the_months_ahead_once(settings):
    settings.SAMPLE_PARTITIONS_AHEAD = 2

    first = partitions.partitions_ensure()
    again = partitions.partitions_ensure()

    assert first.created == ["usage_sample_y2031m05", "usage_sample_y2031m06", "usage_sample_y2031m07"]
    assert again.created == []
    assert {partitions.month_span(Month(2031, m)) for m in (5, 6, 7)} <= set(partitions.partitions_list())


@postgres_only
@time_machine.travel("2031-05-15T12:00:00Z", tick=False)
def test_samples_of_a_month_without_partition_wait_in_default_and_move_into_their_own(settings):
    ingest(series(start=at("2029-03-03T09:00:00Z"), minutes=10))
    assert rows_in("usage_sample_default") == 10

    report = partitions.partitions_ensure(ahead=0)

    assert "usage_sample_y2029m03" in report.created and report.moved_rows == 10
    assert (rows_in("usage_sample_y2029m03"), rows_in("usage_sample_default")) == (10, 0)
    assert Sample.objects.count() == 10


@postgres_only
@time_machine.travel("2031-05-15T12:00:00Z", tick=False)
def test_the_command_ensures_partitions(capsys):
    call_command("partitions", "--ensure", "--ahead", "1", "--list")

    out = capsys.readouterr().out
    assert "usage_sample_y2031m05" in out and "usage_sample_y2031m06" in out


@time_machine.travel("2026-12-20T12:00:00Z", tick=False)
def test_retention_drops_old_months_of_samples_but_never_the_rollups_or_the_charges(cast, settings):
    rate(price="2.00")
    ingest([
        job_record(start_time="2026-09-01T00:00:00Z", submit_time="2026-09-01T00:00:00Z",
                   end_time="2026-09-01T02:00:00Z", state="completed"),
        *series(start=at("2026-09-01T00:00:00Z"), minutes=120),
        *series(start=at("2026-11-25T00:00:00Z"), minutes=30, job_id=None),
    ])  # fmt: skip
    partitions.partitions_ensure()
    before = chargeback_by_team(month=Month(2026, 9))
    settings.SAMPLE_RETENTION_DAYS = 30  # cutoff 2026-11-20: September and October go, November stays

    report = partitions.partitions_maintain()

    assert Sample.objects.count() == 30
    assert not Sample.objects.filter(ts__lt=at("2026-11-01T00:00:00Z")).exists()
    if connection.vendor == "postgresql":
        assert "usage_sample_y2026m09" in report.dropped and "usage_sample_y2026m11" not in report.dropped
    assert sum(JobGpuHour.objects.values_list("samples", flat=True)) == 120
    assert sum(GpuHour.objects.values_list("samples", flat=True)) == 150
    assert chargeback_by_team(month=Month(2026, 9)) == before
    assert {c.team: c.cost for c in before}["NLP"] == Decimal(4)  # 2 h x 1 GPU x 2.00


@postgres_only
@time_machine.travel("2026-12-20T12:00:00Z", tick=False)
def test_late_samples_older_than_retention_still_count_in_the_rollups(settings):
    settings.SAMPLE_RETENTION_DAYS = 30
    partitions.partitions_maintain()

    ingest(series(start=at("2026-06-10T09:00:00Z"), minutes=20))
    partitions.partitions_maintain()

    assert "usage_sample_y2026m06" not in {s.name for s in partitions.partitions_list()}
    assert Sample.objects.count() == 0  # raw rows past retention: gone from DEFAULT, as policy says
    assert JobGpuHour.objects.get().samples == 20  # but nothing the reports read was lost


def test_retention_off_keeps_every_sample(settings):
    settings.SAMPLE_RETENTION_DAYS = 0
    ingest(series(start=at("2020-01-01T00:00:00Z"), minutes=5))

    report = partitions.partitions_maintain()

    assert (report.dropped, report.deleted_rows) == ([], 0)
    assert Sample.objects.count() == 5


@postgres_only
@time_machine.travel("2031-05-30T12:00:00Z", tick=False)
def test_daily_partitions_are_created_ahead_by_day_and_cross_into_the_next_month(settings):
    settings.SAMPLE_PARTITION = "day"

    report = partitions.partitions_ensure(ahead=2)

    assert report.created == ["usage_sample_y2031m05d30", "usage_sample_y2031m05d31", "usage_sample_y2031m06d01"]
    assert partitions.partitions_ensure(ahead=2).created == []


@postgres_only
@time_machine.travel("2031-05-30T12:00:00Z", tick=False)
def test_a_day_already_covered_by_a_monthly_partition_gets_no_daily_one(settings):
    partitions.partitions_ensure(ahead=0)  # May, by month
    settings.SAMPLE_PARTITION = "day"

    report = partitions.partitions_ensure(ahead=2)

    assert report.created == ["usage_sample_y2031m06d01"]
    ingest(series(start=at("2031-05-30T09:00:00Z"), minutes=5))
    assert (rows_in("usage_sample_y2031m05"), rows_in("usage_sample_default")) == (5, 0)


@postgres_only
@time_machine.travel("2031-05-15T12:00:00Z", tick=False)
def test_samples_of_a_day_without_partition_move_from_default_into_their_own_day(settings):
    settings.SAMPLE_PARTITION = "day"
    ingest(series(start=at("2031-05-10T23:55:00Z"), minutes=10))  # five minutes each side of midnight

    report = partitions.partitions_ensure(ahead=0)

    assert {"usage_sample_y2031m05d10", "usage_sample_y2031m05d11"} <= set(report.created)
    assert report.moved_rows == 10
    assert (rows_in("usage_sample_y2031m05d10"), rows_in("usage_sample_y2031m05d11")) == (5, 5)
    assert rows_in("usage_sample_default") == 0


@time_machine.travel("2031-05-20T12:00:00Z", tick=False)
def test_daily_retention_drops_whole_days_past_the_cutoff_and_keeps_the_rollups(settings):
    settings.SAMPLE_PARTITION = "day"
    for day in ("2031-05-10", "2031-05-16", "2031-05-17", "2031-05-19"):
        ingest(series(start=at(f"{day}T10:00:00Z"), minutes=10))
    partitions.partitions_ensure()
    settings.SAMPLE_RETENTION_DAYS = 3  # cutoff 2031-05-17 12:00: the 10th and 16th go, the 17th is kept whole

    report = partitions.partitions_maintain()

    assert Sample.objects.count() == 20
    assert not Sample.objects.filter(ts__lt=at("2031-05-17T00:00:00Z")).exists()
    if connection.vendor == "postgresql":
        assert {"usage_sample_y2031m05d10", "usage_sample_y2031m05d16"} <= set(report.dropped)
        kept = {s.name for s in partitions.partitions_list()}
        assert {"usage_sample_y2031m05d17", "usage_sample_y2031m05d19"} <= kept
    assert sum(JobGpuHour.objects.values_list("samples", flat=True)) == 40
