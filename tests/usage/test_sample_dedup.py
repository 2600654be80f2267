"""A reading is stored and counted once, whichever way it comes back: twice in one batch, again in a later batch
under another batch id, across a partition boundary, after retention dropped older partitions; the batches that
carry only new readings take the writer's plain-insert path, the others its ON CONFLICT path."""

from datetime import timedelta

import pytest
import time_machine
from django.db import connection

from governance.fleet.models import Gpu
from governance.usage import partitions
from governance.usage.models import GpuHour, JobGpuHour, Sample
from governance.usage.writer import samples as writer_samples
from tests.factories import at, ingest, job_record, series

pytestmark = pytest.mark.django_db


@pytest.fixture
def paths(monkeypatch):
    """Which statement wrote each batch's samples: 'new' (the plain insert) or 'merge' (ON CONFLICT)."""
    taken: list[str] = []
    execute = writer_samples.execute_in_turn

    def spy(statements, params=None):
        if connection.vendor == "postgresql":
            taken.append("merge" if "ON CONFLICT" in statements[0] else "new")
        return execute(statements, params)

    monkeypatch.setattr(writer_samples, "execute_in_turn", spy)
    return taken


def hour_samples() -> tuple[int, int]:
    """Samples counted in the job rollup and in the GPU rollup."""
    job_hours = JobGpuHour.objects.values_list("samples", flat=True)
    return sum(job_hours), sum(GpuHour.objects.values_list("samples", flat=True))


def test_a_reading_sent_twice_in_one_batch_is_stored_and_counted_once(paths):
    readings = series(start=at("2026-11-03T09:00:00Z"), minutes=10, sm_util=40.0)

    ingest([job_record(), *readings, readings[3], readings[7]])

    assert Sample.objects.count() == 10
    assert hour_samples() == (10, 10)
    assert JobGpuHour.objects.get().sm_sum == pytest.approx(400.0)
    if connection.vendor == "postgresql":
        assert paths == ["new", "merge"]  # the plain insert met the repeat, rolled back, and merged


def test_readings_sent_again_in_a_later_batch_count_once_and_only_the_new_ones_are_added(paths):
    start = at("2026-11-03T09:00:00Z")
    ingest([job_record(), *series(start=start, minutes=20, sm_util=30.0)])

    # A collector replays its spool under a new batch id: ten readings stored already, ten new.
    ingest(series(start=start + timedelta(minutes=10), minutes=20, sm_util=30.0))

    assert Sample.objects.count() == 30
    assert hour_samples() == (30, 30)
    assert JobGpuHour.objects.get().sm_sum == pytest.approx(900.0)
    if connection.vendor == "postgresql":
        assert paths == ["new", "new", "merge"]


def test_a_batch_of_only_known_readings_changes_nothing(paths):
    readings = series(start=at("2026-11-03T09:00:00Z"), minutes=15)
    ingest([job_record(), *readings])
    before = (Sample.objects.count(), hour_samples(), list(JobGpuHour.objects.values_list("sm_sum", "sm_max")))

    ingest(readings)

    assert (Sample.objects.count(), hour_samples(), list(JobGpuHour.objects.values_list("sm_sum", "sm_max"))) == before


def test_new_readings_of_other_gpus_at_the_same_times_are_not_duplicates(paths):
    start = at("2026-11-03T09:00:00Z")
    ingest([job_record(gpus=2), *series(start=start, minutes=10)])

    ingest(series(start=start, minutes=10, gpu_uuid="GPU-0000-0002", gpu_index=1))

    assert Sample.objects.count() == 20
    assert Gpu.objects.count() == 2
    assert hour_samples() == (20, 20)
    if connection.vendor == "postgresql":
        assert paths == ["new", "new"]


@time_machine.travel("2026-12-02T00:00:00Z", tick=False)
def test_a_batch_straddling_two_monthly_partitions_lands_in_both_and_a_replay_counts_once(paths):
    with time_machine.travel("2026-11-30T12:00:00Z", tick=False):
        partitions.partitions_ensure()  # November's partition and those ahead
    readings = series(start=at("2026-11-30T23:50:00Z"), minutes=20, job_id=None)  # ten in November, ten after

    ingest(readings)
    ingest(readings[5:15])

    assert Sample.objects.filter(ts__lt=at("2026-12-01T00:00:00Z")).count() == 10
    assert Sample.objects.filter(ts__gte=at("2026-12-01T00:00:00Z")).count() == 10
    assert GpuHour.objects.filter(hour=at("2026-11-30T23:00:00Z")).get().samples == 10
    assert GpuHour.objects.filter(hour=at("2026-12-01T00:00:00Z")).get().samples == 10
    if connection.vendor == "postgresql":
        assert {"usage_sample_y2026m11", "usage_sample_y2026m12"} <= {s.name for s in partitions.partitions_list()}
        assert paths == ["new", "new", "merge"]


@time_machine.travel("2031-06-01T01:00:00Z", tick=False)
def test_a_batch_straddling_two_daily_partitions_is_deduplicated_in_each(settings, paths):
    settings.SAMPLE_PARTITION = "day"  # in 2031: no monthly partition covers these days
    with time_machine.travel("2031-05-31T12:00:00Z", tick=False):
        partitions.partitions_ensure(ahead=1)
    readings = series(start=at("2031-05-31T23:55:00Z"), minutes=10, job_id=None)

    ingest(readings)
    ingest([*readings[3:8], *series(start=at("2031-06-01T00:05:00Z"), minutes=5, job_id=None)])

    assert Sample.objects.filter(ts__lt=at("2031-06-01T00:00:00Z")).count() == 5
    assert Sample.objects.count() == 15
    assert sum(GpuHour.objects.values_list("samples", flat=True)) == 15
    if connection.vendor == "postgresql":
        assert {"usage_sample_y2031m05d31", "usage_sample_y2031m06d01"} <= {
            s.name for s in partitions.partitions_list()
        }
        assert paths == ["new", "new", "merge"]


@time_machine.travel("2026-12-20T12:00:00Z", tick=False)
def test_after_retention_dropped_old_months_readings_of_the_kept_month_still_count_once(settings, paths):
    settings.SAMPLE_RETENTION_DAYS = 30  # cutoff 2026-11-20: October goes, November stays
    ingest(series(start=at("2026-10-10T09:00:00Z"), minutes=10, job_id=None))
    kept = series(start=at("2026-11-25T09:00:00Z"), minutes=10, job_id=None)
    ingest(kept)
    partitions.partitions_maintain()
    assert Sample.objects.count() == 10

    ingest(kept)
    ingest(series(start=at("2026-11-25T09:10:00Z"), minutes=10, job_id=None))

    assert Sample.objects.count() == 20
    assert GpuHour.objects.get(hour=at("2026-11-25T09:00:00Z")).samples == 20
    assert GpuHour.objects.get(hour=at("2026-10-10T09:00:00Z")).samples == 10  # the rollups outlive retention
