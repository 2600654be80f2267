"""Profiling counters (GPM through NVML, DCGM's profiling fields) rolled up per job, GPU and hour, and the rules that
read them: communication-bound jobs, memory-bandwidth-bound jobs, tensor cores left idle."""

from __future__ import annotations

from governance.usage.models import JobGpuHour
from tests.efficiency.conftest import a_job, gpu
from tests.invariants import assert_billing_invariants


def two_gpus(**fields) -> list[dict]:
    """A 2-GPU job for two hours, both GPUs reporting `fields` every minute."""
    records = [a_job(minutes=120, gpus=2)]
    for n in range(2):
        records += gpu(minutes=120, uuid=f"GPU-{n}", gpu_index=n, **fields)
    return records


def test_the_counters_are_rolled_up_where_the_source_gives_them_and_unknown_where_it_does_not(findings):
    findings([
        *two_gpus(sm_util=30.0, nvlink_mibps=20480.0, dram_active=45.0, tensor_active=12.0, pcie_rx_mibps=100.0,
                  pcie_tx_mibps=50.0),
        a_job(minutes=60, job_id="plain"),
        *gpu(minutes=60, job_id="plain", uuid="GPU-9", sm_util=50.0),
    ])  # fmt: skip

    hour = JobGpuHour.objects.filter(job__external_id="4242").order_by("gpu_id", "hour").first()
    plain = JobGpuHour.objects.filter(job__external_id="plain").first()

    assert (hour.nvlink_sum / hour.nvlink_samples, hour.dram_sum / hour.dram_samples) == (20480.0, 45.0)
    assert (hour.pcie_sum / hour.pcie_samples, hour.tensor_sum / hour.tensor_samples) == (150.0, 12.0)
    assert (plain.nvlink_samples, plain.dram_samples, plain.pcie_samples, plain.tensor_samples) == (0, 0, 0, 0)
    assert_billing_invariants()


def test_low_sm_while_nvlink_is_busy_is_communication_bound(findings):
    found = findings(two_gpus(sm_util=30.0, nvlink_mibps=20480.0))

    comm = found["comm_bound"]
    assert comm.evidence == {"gpus_held": 2, "sm_mean": 30.0, "nvlink_mibps_mean": 20480, "pcie_mibps_mean": None}
    assert "NVLink carries 20.0 GiB/s per GPU" in comm.advice and "gradient accumulation" in comm.advice
    assert comm.savings == 0  # the cost is speed, not idle GPUs
    assert_billing_invariants()


def test_over_pcie_it_names_the_missing_nvlink_and_without_link_counters_it_says_nothing(findings):
    over_pcie = findings(two_gpus(sm_util=30.0, pcie_rx_mibps=3000.0, pcie_tx_mibps=3000.0))

    assert "PCIe carries 5.9 GiB/s per GPU and no NVLink traffic is seen" in over_pcie["comm_bound"].advice


def test_no_link_counters_or_one_gpu_is_never_communication_bound(findings):
    found = findings([
        *two_gpus(sm_util=30.0),
        a_job(minutes=120, job_id="solo"),
        *gpu(minutes=120, job_id="solo", uuid="GPU-7", sm_util=30.0, nvlink_mibps=30000.0),
    ])  # fmt: skip

    assert "comm_bound" not in found


def test_a_busy_dram_with_low_sm_is_memory_bound_by_bandwidth_and_idle_tensor_cores_are_named(findings):
    found = findings(two_gpus(sm_util=20.0, dram_active=75.0, tensor_active=2.0, mem_used_mib=10 * 1024.0))

    memory = found["memory_bound"]
    assert memory.evidence["dram_active_mean"] == 75.0
    assert memory.advice.startswith("DRAM is busy 75% of the time while SM averages 20%")
    assert "Tensor cores are active 2.0% of the time" in found["low_utilization"].advice
    assert found["low_utilization"].evidence["tensor_active_mean"] == 2.0
    assert_billing_invariants()
