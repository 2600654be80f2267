"""The rules as pure functions: summaries built by hand, no database."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from governance.efficiency.rules import RULES, rules_evaluate
from governance.efficiency.summary import GpuSummary, HourStat, JobSummary
from governance.efficiency.thresholds import Thresholds

T0 = datetime(2026, 11, 3, 9, tzinfo=UTC)
MIB = 81559.0


def hour(i: int, sm: float, *, samples: int = 60, idle: int | None = None, mem: float = 20480.0) -> HourStat:
    idle = (samples if sm < 1 else 0) if idle is None else idle
    return HourStat(T0 + timedelta(hours=i), samples, idle, sm * samples, sm, sm * sm * samples, mem, MIB)


def job(*hours: HourStat, running: bool = False, labels: dict | None = None) -> JobSummary:
    gpu = GpuSummary(1, "gpu-017", 0, "NVIDIA H100 80GB HBM3", MIB, 0, "", tuple(hours))
    return JobSummary(1, "4242", "c1", 1, "NVIDIA H100 80GB HBM3", T0, T0 + timedelta(hours=len(hours)), running,
                      labels or {}, (gpu,), Decimal("2.00"))  # fmt: skip


def rules(summary: JobSummary, **thresholds) -> dict:
    return {d.rule: d for d in rules_evaluate(summary, Thresholds(**thresholds))}


def test_the_registry_holds_the_ten_rules_of_the_design_comm_bound_and_the_shared_gpus_three():
    assert sorted(RULES) == sorted([
        "idle_gpu", "overallocated", "low_utilization", "mig_fit", "batch_headroom", "memory_bound", "data_starved",
        "numa_misaligned", "topology_split", "inference_oversized", "comm_bound", "share_oversized",
        "time_slice_contention", "whole_gpu_share_fit",
    ])  # fmt: skip


def test_idle_after_busy_is_priced_as_the_idle_hours_at_the_rate():
    drafts = rules(job(hour(0, 90), hour(1, 0), hour(2, 0), hour(3, 0)))

    assert drafts["idle_gpu"].evidence["idle_gpu_hours"] == 3.0
    assert drafts["idle_gpu"].evidence["idle_cost"] == "6.00"


def test_a_running_job_claims_the_idle_hours_so_far_never_a_month_extrapolated():
    drafts = rules(job(hour(0, 90), hour(1, 0), hour(2, 0), hour(3, 0), running=True))

    assert drafts["idle_gpu"].wasted_hours == {T0.date(): 3.0}  # the 3 idle hours it had, not 3/4 of 720 h


def test_a_tighter_idle_threshold_in_settings_changes_what_fires():
    summary = job(hour(0, 90), hour(1, 0, samples=60), hour(2, 90))

    assert "idle_gpu" in rules(summary)
    assert "idle_gpu" not in rules(summary, idle_min_minutes=90)


def test_mig_fit_names_the_slice_and_its_share_of_the_cost():
    peak = 8.0 * 1024
    drafts = rules(job(hour(0, 6, mem=peak), hour(1, 6, mem=peak)))

    assert drafts["mig_fit"].advice.endswith("would cost 1/7 of today's.")


def test_a_job_without_samples_has_no_findings():
    empty = JobSummary(1, "1", "c1", 1, "x", T0, T0 + timedelta(hours=2), False)

    assert rules_evaluate(empty, Thresholds()) == []


def on_share(share: float, *hours: HourStat) -> JobSummary:
    gpu = GpuSummary(1, "gpu-017", 0, "NVIDIA H100 80GB HBM3", MIB, 0, "", tuple(hours))
    return JobSummary(1, "ml/pod-a", "c1", share, "NVIDIA H100 80GB HBM3", T0, T0 + timedelta(hours=len(hours)),
                      False, {}, (gpu,), Decimal("2.00"))  # fmt: skip


def test_a_pod_using_far_less_than_its_share_is_told_the_share_that_would_do_and_how_many_pods_fit():
    drafts = rules(on_share(0.5, hour(0, 5), hour(1, 5), hour(2, 5), hour(3, 5)))

    advice = drafts["share_oversized"]
    # 5% SM of a half GPU is at most 10% of its share; twice the SM, in twentieths of a GPU: 0.10.
    assert advice.evidence["share_used_percent"] == 10.0 and advice.evidence["suggested_share"] == 0.1
    assert "request 0.10 of a GPU, or pack 10 pods per GPU instead of 2" in advice.advice
    assert advice.wasted_hours == {T0.date(): pytest.approx(4 * 0.8)}  # 4 held hours of the share, 4/5 unneeded
    assert "mig_fit" not in drafts, "a share is no whole GPU to slice"


def test_a_pod_whose_gpu_was_split_by_process_is_sized_by_its_own_sm_not_the_gpus():
    # The GPU ran at 60% (its neighbours' work too); the pod's own processes at 5% of it.
    busy = [replace(hour(i, 60), job_sm_sum=5.0 * 60, job_sm_samples=60) for i in range(4)]
    drafts = rules(on_share(0.5, *busy))

    advice = drafts["share_oversized"]
    assert advice.evidence["own_sm_mean"] == 5.0 and advice.evidence["suggested_share"] == 0.1
    assert "Uses 10% of its 0.5 share of the GPU (its own processes' SM 5.0%)" in advice.advice
    # Read as the GPU's SM, the same pod uses its whole share: nothing to say.
    assert "share_oversized" not in rules(on_share(0.5, *(hour(i, 60) for i in range(4))))


def test_a_pod_that_uses_its_share_or_holds_whole_gpus_is_not_told_to_shrink_it():
    assert "share_oversized" not in rules(on_share(0.25, hour(0, 20), hour(1, 20)))  # 80% of its share
    assert "share_oversized" not in rules(job(hour(0, 5), hour(1, 5)))
    assert "share_oversized" not in rules(on_share(0.05, hour(0, 1.5), hour(1, 1.5)))  # nothing smaller to ask


def test_a_one_gpu_job_mig_fit_already_advises_is_not_told_a_share_too():
    # 5% SM and 20 GiB: mig_fit names its slice; whole_gpu_share_fit leaves it to it.
    drafts = rules(job(*(hour(i, 5) for i in range(3))))
    assert "mig_fit" in drafts and "whole_gpu_share_fit" not in drafts


def test_a_two_gpu_job_whose_peaks_fit_a_slice_is_told_one_per_gpu():
    gpus = tuple(GpuSummary(i, "gpu-017", i, "NVIDIA H100 80GB HBM3", MIB, 0, "", tuple(hour(h, 30) for h in range(3)))
                 for i in (1, 2))  # fmt: skip
    two = JobSummary(1, "4242", "c1", 2, "NVIDIA H100 80GB HBM3", T0, T0 + timedelta(hours=3), False, {}, gpus,
                     Decimal("2.00"))  # fmt: skip

    fit = rules(two)["whole_gpu_share_fit"]

    # Peak SM 30% and 20 GiB x 1.2 = 24 GiB on each GPU: 3g.40gb (3/7) holds both.
    assert (fit.evidence["gpus_held"], fit.evidence["profile"]) == (2, "3g.40gb")
    assert "At its busiest each of its GPUs ran 30% SM" in fit.advice and "40 GiB each" in fit.advice
    assert fit.wasted_hours == {T0.date(): pytest.approx(6 * 4 / 7)}  # 6 GPU-hours held, 4/7 of each unneeded
