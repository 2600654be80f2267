from datetime import UTC, datetime

import pynvml
import pytest

from collectors.records import SampleRecord, decode_record_line, encode
from collectors.sources import SourceConfig, SourceUnavailable
from collectors.sources.nvml import NvmlSource, mig_profile
from collectors.testing import FakeNvml, FakeProcess, h100_mig, h200

NOW = datetime(2026, 11, 3, 9, 15, tzinfo=UTC)


def open_source(fake_host, nvml) -> NvmlSource:
    config = SourceConfig(cluster="c1", node="gpu-017", mapping=fake_host.mapping(), host=fake_host.host)
    return NvmlSource.open(config, nvml=nvml)


def test_a_gpu_without_mig_is_one_sample_with_its_job_and_numa_node(fake_host):
    fake_host.gpu("00000000:83:00.0", numa_node=0)
    for pid in (10291, 10293, 10309):
        fake_host.process(pid, env={"SLURM_JOB_ID": "4746"}, cpus="0-23")
    source = open_source(fake_host, FakeNvml([h200()]))

    (sample,) = source.read(NOW)

    assert isinstance(sample, SampleRecord)
    assert (sample.gpu_uuid, sample.gpu_index, sample.gpu_model) == (h200().uuid, 0, "NVIDIA H200")
    assert (sample.sm_util, sample.mem_util, sample.mem_used_mib, sample.mem_total_mib) == (100.0, 7.0, 32362, 143771)
    assert sample.power_w == pytest.approx(627.32)
    assert (sample.job_id, sample.gpu_numa_node, sample.job_cpu_numa_nodes) == ("4746", 0, [0])
    assert sample.pcie_tx_mibps == pytest.approx(4217 / 1024) and sample.mig_profile is None
    assert decode_record_line(encode(sample)) == sample


def test_gpm_metrics_appear_from_the_second_round_on(fake_host):
    source = open_source(fake_host, FakeNvml([h200()]))

    first, second = source.read(NOW)[0], source.read(NOW)[0]

    assert first.tensor_active is None and first.dram_active is None
    assert (second.tensor_active, second.dram_active) == (0.0, 38.2)
    assert (second.pcie_tx_mibps, second.pcie_rx_mibps) == (4.1, 8.5)  # the interval's counters win over 20 ms


def test_each_mig_instance_is_a_gpu_of_its_own_with_its_profile_and_processes(fake_host):
    fake_host.gpu("00000000:00:09.0", numa_node=0)
    for pid in (21180, 21181, 21198):
        fake_host.process(pid, cgroup="0::/system.slice/slurmstepd.scope/job_5120/step_0/user/task_0", cpus="0-19")
    source = open_source(fake_host, FakeNvml([h100_mig()]))
    source.read(NOW)  # GPM needs two samples; MIG SM activity comes only from GPM

    samples = source.read(NOW)

    assert [(s.mig_profile, s.mem_total_mib) for s in samples] == [
        ("3g.40gb", 40448), ("2g.20gb", 20096), ("1g.10gb", 9984), ("1g.10gb", 9984)
    ]  # fmt: skip
    assert len({s.gpu_uuid for s in samples}) == 4 and all(s.gpu_uuid.startswith("MIG-") for s in samples)
    busy, *idle = samples
    assert (busy.job_id, busy.sm_util, busy.mem_used_mib, busy.job_cpu_numa_nodes) == ("5120", 96.0, 11091, [0])
    assert [s.job_id for s in idle] == [None, None, None]
    assert all(s.power_w is None and s.gpu_index == 0 and s.gpu_model == "NVIDIA H100 80GB HBM3" for s in samples)


def test_mig_instances_without_gpm_are_sampled_with_sm_unknown_rather_than_idle(fake_host):
    gpu = h100_mig()
    gpu.gpm = None  # an A100: MIG, but no GPM
    source = open_source(fake_host, FakeNvml([gpu]))

    samples = source.read(NOW)

    assert [(s.mig_profile, s.sm_util) for s in samples] == [
        ("3g.40gb", None), ("2g.20gb", None), ("1g.10gb", None), ("1g.10gb", None),
    ]  # fmt: skip
    assert samples[0].mem_used_mib == 11091 and len(source.read(NOW)) == 4


def test_a_process_that_vanished_between_calls_maps_to_no_job_and_the_rest_still_count(fake_host):
    gpu = h200()
    gpu.processes = [FakeProcess(10291, 2566), FakeProcess(10309, 28234)]
    fake_host.process(10291, env={"SLURM_JOB_ID": "77"}, cpus="24-47")  # 10309 is gone from /proc
    source = open_source(fake_host, FakeNvml([gpu]))

    (sample,) = source.read(NOW)

    assert (sample.job_id, sample.job_cpu_numa_nodes) == ("77", [1])


def test_a_metric_the_gpu_does_not_support_is_left_out(fake_host):
    gpu = h200()
    gpu.pcie_kbps, gpu.gpm = None, None  # NVMLError_NotSupported for both
    source = open_source(fake_host, FakeNvml([gpu]))

    (sample,) = source.read(NOW)

    assert sample.pcie_tx_mibps is None and sample.pcie_rx_mibps is None and sample.tensor_active is None
    assert sample.sm_util == 100.0 and sample.gpu_numa_node is None  # no sysfs entry, NVML NUMA not supported


def test_the_fake_raises_the_real_library_errors():
    nvml = FakeNvml([h100_mig()])
    parent = nvml.nvmlDeviceGetHandleByIndex(0)

    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetUtilizationRates(parent)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 6)


def test_a_node_without_the_nvidia_library_is_reported_clearly(fake_host):
    with pytest.raises(SourceUnavailable, match="cannot initialise NVML"):
        open_source(fake_host, FakeNvml([], library_found=False))


def test_the_mig_profile_is_read_from_the_device_name():
    assert mig_profile("NVIDIA H100 80GB HBM3 MIG 1g.10gb") == "1g.10gb"
    assert mig_profile("NVIDIA H200") is None
