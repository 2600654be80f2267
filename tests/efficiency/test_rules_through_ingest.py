"""Every rule on both sides of each threshold, from records in the ingest format through ingest and rollups."""

from decimal import Decimal

import pytest

from tests.efficiency.conftest import GIB, a_job, gpu

pytestmark = pytest.mark.django_db

H100_GIB = 81559.0 / 1024


def busy_then(minutes_busy: int, minutes_idle: int, *, sm: float = 90.0) -> list[dict]:
    total = minutes_busy + minutes_idle
    return [a_job(minutes=total), *gpu(minutes=total, sm_util=lambda s: sm if s < minutes_busy * 60 else 0.0)]


# idle_gpu -------------------------------------------------------------------------------------------------------


def test_a_job_busy_for_an_hour_then_idle_for_three_gets_idle_gpu_with_the_idle_periods_cost(findings):
    found = findings(busy_then(60, 180))

    idle = found["idle_gpu"]
    assert idle.evidence["idle_gpu_hours"] == 3.0
    assert idle.evidence["idle_cost"] == "6.00"  # 3 GPU-hours at 2.00 USD
    assert idle.evidence["gpus"][0]["since"] == "2026-11-03T10:00:00+00:00"
    assert idle.savings == Decimal("6.00")  # ended job: the waste it actually had
    assert "3.0 h" in idle.advice and "after doing work" in idle.advice and "6.00 USD" in idle.advice


def test_a_gpu_busy_all_along_is_not_idle(findings):
    assert "idle_gpu" not in findings(busy_then(240, 0))


def test_idle_for_35_minutes_at_the_end_fires_and_for_25_minutes_does_not(findings):
    assert "idle_gpu" in findings(busy_then(180, 35))


def test_idle_for_25_minutes_at_the_end_is_under_the_30_minute_threshold(findings):
    assert "idle_gpu" not in findings(busy_then(180, 25))


def test_a_gpu_never_used_is_idle_and_the_advice_says_to_check_the_code_uses_it(findings):
    found = findings([a_job(minutes=60), *gpu(minutes=60, sm_util=0.0)])

    assert "never used" in found["idle_gpu"].advice
    assert found["idle_gpu"].severity == "critical"


def test_a_job_shorter_than_five_minutes_gets_no_findings(findings):
    assert findings([a_job(minutes=4), *gpu(minutes=4, sm_util=0.0)]) == {}


# overallocated --------------------------------------------------------------------------------------------------


def two_gpus(first: float, second: float) -> list[dict]:
    return [
        a_job(minutes=120, gpus=2),
        *gpu(minutes=120, sm_util=first),
        *gpu(minutes=120, sm_util=second, uuid="GPU-0000-0002", gpu_index=1),
    ]


def test_a_two_gpu_job_with_one_gpu_idle_is_told_to_request_one(findings):
    found = findings(two_gpus(80.0, 0.0))

    over = found["overallocated"]
    assert over.evidence["gpus_idle"] == 1 and over.evidence["idle_gpu_hours"] == 2.0
    # The idle GPU's 2 hours are idle_gpu's saving already: each GPU-hour's saving is counted once.
    assert found["idle_gpu"].savings == Decimal("4.00") and over.savings == Decimal("0.00")
    assert "request 1 GPU instead of 2" in over.advice


def test_a_two_gpu_job_using_both_is_not_overallocated(findings):
    assert "overallocated" not in findings(two_gpus(80.0, 70.0))


def test_an_idle_gpu_beside_one_under_the_busy_threshold_is_not_overallocated(findings):
    assert "overallocated" not in findings(two_gpus(5.0, 0.0))


# low_utilization ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("sm", "severity"), [(10.0, "critical"), (20.0, "info"), (30.0, None)])
def test_low_utilisation_is_red_under_15_a_note_under_25_and_quiet_above(findings, sm, severity):
    found = findings([a_job(minutes=120), *gpu(minutes=120, sm_util=sm)])

    if severity is None:
        assert "low_utilization" not in found
    else:
        assert found["low_utilization"].severity == severity
        assert f"{sm:.0f}%" in found["low_utilization"].advice
        assert found["low_utilization"].evidence["cluster_sm_mean"] == sm  # the only job: cluster mean is its own


# mig_fit --------------------------------------------------------------------------------------------------------


def one_gpu(*, sm: float, mem_gib: float, minutes: int = 120, gpus: int = 1, **job) -> list[dict]:
    return [a_job(minutes=minutes, gpus=gpus, **job), *gpu(minutes=minutes, sm_util=sm, mem_used_mib=mem_gib * GIB)]


def test_a_small_one_gpu_job_is_offered_the_smallest_mig_slice_that_holds_1_2_times_its_peak(findings):
    found = findings(one_gpu(sm=6.0, mem_gib=8.0))

    mig = found["mig_fit"]
    assert mig.evidence["profile"] == "1g.10gb"  # 8 GiB x 1.2 = 9.6 GiB
    assert mig.advice.startswith("Peak 8.0 GiB of 80 GiB and 6.0% SM; a 1g.10gb slice fits with margin")
    assert "1/7 of today's" in mig.advice
    assert mig.savings == Decimal("3.43")  # 2 h x 2.00 x 6/7


def test_a_peak_whose_margin_passes_10_gib_needs_the_20_gib_slice(findings):
    assert findings(one_gpu(sm=6.0, mem_gib=8.5))["mig_fit"].evidence["profile"] == "1g.20gb"


def test_mig_fit_needs_sm_under_15_percent(findings):
    assert "mig_fit" in findings(one_gpu(sm=14.0, mem_gib=8.0))


def test_mig_fit_is_quiet_at_16_percent_sm(findings):
    assert "mig_fit" not in findings(one_gpu(sm=16.0, mem_gib=8.0))


def test_mig_fit_is_quiet_when_only_the_whole_gpu_holds_the_peak(findings):
    assert "mig_fit" not in findings(one_gpu(sm=6.0, mem_gib=60.0))


# batch_headroom -------------------------------------------------------------------------------------------------


def test_low_sm_and_memory_under_half_suggest_a_larger_batch_with_its_factor(findings):
    found = findings(one_gpu(sm=50.0, mem_gib=0.3 * H100_GIB))

    batch = found["batch_headroom"]
    assert batch.evidence["batch_factor"] == 2.8  # 85% / 30%
    assert "up to 2.8x" in batch.advice


def test_batch_headroom_is_quiet_at_65_percent_sm(findings):
    assert "batch_headroom" not in findings(one_gpu(sm=65.0, mem_gib=0.3 * H100_GIB))


def test_batch_headroom_is_quiet_when_memory_is_over_half(findings):
    assert "batch_headroom" not in findings(one_gpu(sm=50.0, mem_gib=0.55 * H100_GIB))


# memory_bound ---------------------------------------------------------------------------------------------------


def test_full_memory_and_low_sm_is_memory_bound(findings):
    found = findings(one_gpu(sm=30.0, mem_gib=0.95 * H100_GIB))

    assert "mixed precision" in found["memory_bound"].advice
    assert found["memory_bound"].evidence["mem_peak_percent"] == 95.0


def test_memory_at_85_percent_is_not_memory_bound(findings):
    assert "memory_bound" not in findings(one_gpu(sm=30.0, mem_gib=0.85 * H100_GIB))


def test_full_memory_with_sm_at_45_percent_is_not_memory_bound(findings):
    assert "memory_bound" not in findings(one_gpu(sm=45.0, mem_gib=0.95 * H100_GIB))


# data_starved ---------------------------------------------------------------------------------------------------


def starved(**fields) -> list[dict]:
    fields.setdefault("sm_util", 30.0)
    return [a_job(minutes=120), *gpu(minutes=120, **fields)]


def test_low_sm_with_high_io_wait_is_data_starved(findings):
    found = findings(starved(io_wait=30.0))

    assert found["data_starved"].evidence["io_wait_mean"] == 30.0
    assert "I/O wait averages 30%" in found["data_starved"].advice and "num_workers" in found["data_starved"].advice


def test_low_io_wait_is_not_data_starved(findings):
    assert "data_starved" not in findings(starved(io_wait=10.0))


def test_a_saturated_host_cpu_is_data_starved(findings):
    assert "host CPUs run at 95%" in findings(starved(host_cpu_util=95.0))["data_starved"].advice


def test_a_busy_host_cpu_under_90_percent_is_not_data_starved(findings):
    assert "data_starved" not in findings(starved(host_cpu_util=80.0))


def test_sm_oscillating_between_waiting_and_computing_is_data_starved(findings):
    found = findings(starved(sm_util=lambda s: 90.0 if (s // 60) % 2 else 0.0))

    assert found["data_starved"].evidence["sm_oscillation_cv"] == 1.0


def test_steady_sm_with_a_small_wobble_is_not_data_starved(findings):
    assert "data_starved" not in findings(starved(sm_util=lambda s: 80.0 if (s // 60) % 2 else 60.0))


# numa_misaligned ------------------------------------------------------------------------------------------------


def test_cpus_on_another_numa_node_than_the_gpu_are_misaligned(findings):
    found = findings(starved(sm_util=80.0, gpu_numa_node=0, job_cpu_numa_nodes=[1]))

    assert found["numa_misaligned"].evidence["gpus"][0]["mismatch_fraction"] == 1.0
    assert "--cpunodebind=0" in found["numa_misaligned"].advice


def test_cpus_on_the_gpus_numa_node_are_aligned(findings):
    assert "numa_misaligned" not in findings(starved(sm_util=80.0, gpu_numa_node=0, job_cpu_numa_nodes=[0, 1]))


def test_misaligned_for_less_than_half_the_samples_stays_quiet(findings):
    records = starved(sm_util=80.0, gpu_numa_node=0, job_cpu_numa_nodes=lambda s: [1] if s < 40 * 60 else [0])
    assert "numa_misaligned" not in findings(records)


# topology_split -------------------------------------------------------------------------------------------------


def split(*, other_node_gpus: int) -> list[dict]:
    records = [
        a_job(minutes=120, gpus=2),
        *gpu(minutes=120, sm_util=80.0, node="gpu-001"),
        *gpu(minutes=120, sm_util=80.0, node="gpu-002", uuid="GPU-0000-0002"),
    ]
    for i in range(other_node_gpus):  # an unallocated node the job could have used
        records += gpu(minutes=5, sm_util=0.0, node="gpu-003", uuid=f"GPU-0003-{i}", gpu_index=i, job_id=None)
    return records


def test_a_two_gpu_job_split_over_two_nodes_when_one_node_holds_two_is_told_to_pack(findings):
    found = findings(split(other_node_gpus=2))

    assert found["topology_split"].evidence["nodes"] == ["gpu-001", "gpu-002"]
    assert "pack it on one node" in found["topology_split"].advice


def test_a_split_is_quiet_when_no_node_holds_the_whole_job(findings):
    assert "topology_split" not in findings(split(other_node_gpus=1))


# inference_oversized --------------------------------------------------------------------------------------------


def serving(*, hours: int = 8, sm: float = 5.0, mem: float = 0.6, kind: str = "inference") -> list[dict]:
    return one_gpu(sm=sm, mem_gib=mem * H100_GIB, minutes=hours * 60, labels={"kind": kind})


def test_a_long_running_inference_job_with_low_sm_and_high_memory_is_oversized(findings):
    found = findings(serving())

    oversized = found["inference_oversized"]
    assert oversized.evidence["profile_after_quantisation"] == "3g.40gb"  # 47.8 GiB / 2 x 1.2 = 28.7 GiB
    assert "quantise" in oversized.advice and "3g.40gb" in oversized.advice


def test_a_short_inference_job_is_not_oversized(findings):
    assert "inference_oversized" not in findings(serving(hours=4))


def test_a_training_job_is_never_inference_oversized(findings):
    assert "inference_oversized" not in findings(serving(kind="training"))


def test_an_inference_job_holding_little_memory_is_not_oversized(findings):
    assert "inference_oversized" not in findings(serving(mem=0.4))


def test_an_inference_job_using_its_sm_is_not_oversized(findings):
    assert "inference_oversized" not in findings(serving(sm=20.0))


# pricing: findings are priced by the chargeback's own rate rule ---------------------------------------------------


def test_a_model_without_a_card_of_its_own_is_priced_at_the_default_card(findings):
    from tests.factories import rate

    rate(model="*", price="3.00")
    a100 = {"gpu_model": "NVIDIA A100-SXM4-40GB"}
    records = busy_then(60, 180)
    records = [{**records[0], **a100}, *({**s, **a100, "mem_total_mib": 40960.0} for s in records[1:])]

    idle = findings(records)["idle_gpu"]
    assert idle.evidence["idle_cost"] == "9.00"  # 3 idle GPU-hours at the default 3.00 USD
    assert idle.savings == Decimal("9.00")


def test_a_clusters_own_card_prices_its_findings_over_the_organisations(findings):
    from governance.costs.models import RateCard
    from governance.fleet.models import Cluster
    from tests.factories import H100, at

    cluster, _ = Cluster.objects.get_or_create(name="c1")
    RateCard.objects.create(gpu_model=H100, cluster=cluster, price_per_gpu_hour=Decimal("5.00"),
                            valid_from=at("2026-01-01T00:00:00Z"), currency="USD")  # fmt: skip

    idle = findings(busy_then(60, 180))["idle_gpu"]
    assert idle.evidence["idle_cost"] == "15.00"  # 3 idle GPU-hours at c1's 5.00, not the organisation's 2.00
