"""Unknown is not zero: null metrics and GPU counts through the ingest path."""

import pytest

from collectors.records import BatchInvalid, decode_batch
from governance.fleet.models import Gpu
from governance.usage.models import GpuHour, Job, JobGpuHour, Sample
from tests.factories import at, batch_body, ingest, job_record, sample_record, series

NO_METRICS = {"sm_util": None, "mem_used_mib": None, "mem_total_mib": None, "power_w": None}


def test_a_sample_needs_only_its_gpu_and_time():
    bare = {k: v for k, v in sample_record().items() if k not in ("sm_util", "mem_used_mib", "mem_total_mib")}

    (record,) = decode_batch(batch_body([bare])).records

    assert (record.sm_util, record.mem_used_mib, record.mem_total_mib) == (None, None, None)


def test_memory_used_over_total_is_refused_only_when_both_are_known():
    decode_batch(batch_body([sample_record(mem_used_mib=90000.0, mem_total_mib=None)]))

    with pytest.raises(BatchInvalid, match="mem_used_mib"):
        decode_batch(batch_body([sample_record(mem_used_mib=90000.0)]))


@pytest.mark.django_db
def test_samples_without_sm_count_as_samples_but_are_neither_idle_nor_zero():
    start = at("2026-11-03T09:00:00Z")
    ingest([job_record(), *series(start=start, minutes=4, sm_util=lambda s: None if s < 120 else 50.0)])

    (hour,) = JobGpuHour.objects.all()
    assert (hour.samples, hour.sm_samples, hour.idle_samples, hour.sm_sum) == (4, 2, 0, 100.0)
    assert GpuHour.objects.get().sm_samples == 2
    assert Sample.objects.filter(sm_util__isnull=True).count() == 2


@pytest.mark.django_db
def test_a_gpu_with_no_metric_at_all_is_still_a_gpu_of_the_job_and_keeps_its_known_memory():
    start = at("2026-11-03T09:00:00Z")
    ingest([job_record(), *series(start=start, minutes=2)])
    ingest(series(start=at("2026-11-03T10:00:00Z"), minutes=3, **NO_METRICS))

    hours = list(JobGpuHour.objects.order_by("hour").values_list("samples", "sm_samples", "mem_used_max"))
    assert hours == [(2, 2, 61234.0), (3, 0, None)]
    assert Gpu.objects.get().memory_total_mib == 81559.0


@pytest.mark.django_db
def test_an_unknown_maximum_gives_way_to_a_known_one_in_a_later_batch():
    ingest([job_record(), *series(start=at("2026-11-03T09:00:00Z"), minutes=2, **NO_METRICS)])
    ingest(series(start=at("2026-11-03T09:10:00Z"), minutes=2, mem_used_mib=1000.0))

    (hour,) = JobGpuHour.objects.all()
    assert (hour.samples, hour.mem_used_max, hour.sm_max) == (4, 1000.0, 87.5)


@pytest.mark.django_db
def test_a_known_gpu_count_is_never_lowered_to_unknown_or_zero_but_a_later_known_count_wins():
    ingest([job_record(gpus=None)])
    assert Job.objects.get().gpus is None

    ingest([job_record(gpus=8)])
    ingest([job_record(gpus=None, state="completed", end_time="2026-11-03T11:00:00Z")])
    ingest([job_record(gpus=0)])
    job = Job.objects.get()
    assert (job.gpus, job.state) == (8, "completed")

    ingest([job_record(gpus=4)])
    assert Job.objects.get().gpus == 4


@pytest.mark.django_db
def test_an_account_no_mapping_knows_keeps_its_name_on_the_job():
    ingest([job_record(project="nobody-maps-this", team=None, gpus=None)])

    job = Job.objects.get()
    assert (job.account, job.project_id, job.gpus) == ("nobody-maps-this", None, None)
