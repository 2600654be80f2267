"""A GPU several jobs share, split by process where NVML can (per-process utilisation): its samples name the jobs
in turn, each with its own processes' SM beside the GPU's. Faked at the pynvml boundary (collectors.testing)."""

import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from collectors.records import encode
from collectors.sources import SourceConfig
from collectors.sources.nvml import NvmlSource
from collectors.testing import FakeNvml, FakeProcess, h200
from governance.usage.models import Job, JobGpuHour
from tests.costs.conftest import declare, set_rate
from tests.factories import ingest, job_record
from tests.invariants import assert_billing_invariants

NOW = datetime(2026, 11, 3, 9, 15, tzinfo=UTC)
NINE = datetime(2026, 11, 3, 9, tzinfo=UTC)


def shared_h200(fake_host, **nvml) -> tuple[NvmlSource, FakeNvml]:
    fake_host.gpu("00000000:83:00.0", numa_node=0)
    fake_host.process(10291, env={"SLURM_JOB_ID": "4746"}, cpus="0-23")
    fake_host.process(10293, env={"SLURM_JOB_ID": "4747"}, cpus="0-23")
    fake_host.process(10309, env={"SLURM_JOB_ID": "4747"}, cpus="0-23")
    gpu = h200()
    gpu.processes = [FakeProcess(10291, 2566, sm_util=(60, 80)), FakeProcess(10293, 1542, sm_util=(10,)),
                     FakeProcess(10309, 28234, sm_util=(5, 15))]  # fmt: skip
    fake = FakeNvml([gpu], **nvml)
    config = SourceConfig(cluster="c1", node="gpu-017", mapping=fake_host.mapping(), host=fake_host.host)
    return NvmlSource.open(config, nvml=fake), fake


@pytest.mark.parametrize("newer_driver", [True, False])
def test_a_shared_gpus_samples_name_its_jobs_in_turn_each_with_its_own_sm(fake_host, newer_driver):
    source, fake = shared_h200(fake_host, processes_utilization_info=newer_driver)

    first = source.read(NOW)[0]
    fake.process_clock_us += 10  # the driver's next samples
    second = source.read(NOW)[0]

    # 4746: its one process at 60 and 80 (mean 70); 4747: 10 + mean(5, 15) = 20. The GPU's SM stays the GPU's.
    assert [(s.job_id, s.job_sm_util, s.sm_util) for s in (first, second)] == [("4746", 70.0, 100.0),
                                                                               ("4747", 20.0, 100.0)]  # fmt: skip


def test_no_per_process_samples_leave_the_gpu_to_the_job_holding_most_memory(fake_host):
    source, fake = shared_h200(fake_host)
    for p in fake.gpus[0].processes:
        p.sm_util = ()  # NVML answers NotFound: nothing to split by

    (sample,) = source.read(NOW)

    assert (sample.job_id, sample.job_sm_util, sample.sm_util) == ("4747", None, 100.0)


def test_a_gpu_one_job_holds_carries_no_job_sm(fake_host):
    fake_host.gpu("00000000:83:00.0", numa_node=0)
    for pid in (10291, 10293, 10309):
        fake_host.process(pid, env={"SLURM_JOB_ID": "4746"}, cpus="0-23")
    gpu = h200()
    for p in gpu.processes:
        p.sm_util = (50,)
    config = SourceConfig(cluster="c1", node="gpu-017", mapping=fake_host.mapping(), host=fake_host.host)

    (sample,) = NvmlSource.open(config, nvml=FakeNvml([gpu])).read(NOW)

    assert (sample.job_id, sample.job_sm_util) == ("4746", None)


@pytest.mark.django_db
def test_each_jobs_own_sm_reaches_its_rollup_and_its_page_no_longer_says_the_gpus_sm(fake_host, client, cast):
    source, fake = shared_h200(fake_host)
    records: list[dict] = [
        job_record(job_id=j, gpus=0.5, gpu_model="NVIDIA H200", submit_time="2026-11-03T09:00:00Z",
                   start_time="2026-11-03T09:00:00Z", end_time="2026-11-03T10:00:00Z", state="completed")
        for j in ("4746", "4747")
    ]  # fmt: skip
    for minute in range(60):  # an hour of rounds, a minute apart
        fake.process_clock_us += 10
        records += [json.loads(encode(s)) for s in source.read(NINE + timedelta(minutes=minute))]
    set_rate("NVIDIA H200", "3.00")
    declare(1, model="NVIDIA H200")

    with time_machine.travel(NINE + timedelta(hours=2), tick=False):
        ingest(records)
        own = {h.job.external_id: (h.samples, h.job_sm_samples, h.job_sm_sum / h.job_sm_samples, h.sm_sum / h.samples)
               for h in JobGpuHour.objects.select_related("job")}  # fmt: skip
        # Each job named in turn, 30 samples each: its own SM (70, 20) beside the GPU's (100).
        assert own == {"4746": (30, 30, 70.0, 100.0), "4747": (30, 30, 20.0, 100.0)}
        client.force_login(cast.admin)
        page = client.get(f"/jobs/{Job.objects.get(external_id='4747').pk}/").content.decode()

    assert 'id="job-shared-gpu">This job holds a share of one GPU (0.5 of it)' in page
    assert "its SM is its own processes'" in page and '<span id="job-own-sm">20.0%</span>' in page
    assert "is the GPU's SM while it held its share" not in page
    assert_billing_invariants()
