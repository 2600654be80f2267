"""Issue 33: advice for shared GPUs through the real path (ingest -> pricing -> findings). A latency-sensitive pod
time-sliced on a saturated GPU is told to take a MIG slice or a GPU of its own (no saving claimed); a whole-GPU job
whose peaks stay under a share is told the share and what it would save, never more than its bill."""

from decimal import Decimal

import pytest
import time_machine

from governance.costs.models import Charge
from governance.efficiency.models import Finding
from governance.efficiency.services import findings_evaluate_all
from tests.costs.conftest import cents, declare, set_rate
from tests.factories import H100, at, ingest, job_record, series
from tests.invariants import assert_billing_invariants, assert_savings_within_spend

pytestmark = pytest.mark.django_db

NOV3 = {"submit_time": "2026-11-03T00:00:00Z", "start_time": "2026-11-03T00:00:00Z", "state": "completed"}
END = {"end_time": "2026-11-03T03:00:00Z"}
T4 = "Tesla T4"
T4_MIB = 15360.0
EVAL = at("2026-11-04T00:00:00Z")


def two_pods_on_one_gpu(*, sm: float, labels_a: dict, gpus: float = 0.5, mem: float = 8192.0) -> list[dict]:
    """Two pods time-sliced on one GPU for 3 hours: the GPU's samples name them in turn, a minute apart."""
    start = at("2026-11-03T00:00:00Z")
    return [
        job_record(job_id="pod-a", **NOV3, **END, gpus=gpus, labels=labels_a),
        job_record(job_id="pod-b", **NOV3, **END, gpus=gpus, labels={"kind": "training"}),
        *series(start=start, minutes=180, every_s=120, job_id="pod-a", sm_util=sm, mem_used_mib=mem),
        *series(start=start.replace(minute=1), minutes=179, every_s=120, job_id="pod-b", sm_util=sm,
                mem_used_mib=mem),
    ]  # fmt: skip


def found(job: str) -> dict[str, Finding]:
    return {f.rule: f for f in Finding.objects.filter(job__external_id=job)}


@time_machine.travel("2026-11-04T00:00:00Z", tick=False)
def test_a_latency_sensitive_pod_time_sliced_on_a_saturated_gpu_is_told_a_mig_slice_or_its_own_gpu(cast):
    set_rate(H100, "2.00")
    declare(1)
    ingest(two_pods_on_one_gpu(sm=96.0, labels_a={"workload-type": "inference"}))
    findings_evaluate_all(now=EVAL)

    contention = found("pod-a")["time_slice_contention"]
    assert contention.evidence["label"] == "workload-type=inference"
    assert contention.evidence["co_tenants_max"] == 1
    assert contention.evidence["gpu_sm_mean_contended"] == 96.0
    # Its peak 8 GiB x 1.2 fits the H100's smallest slice; the advice names it and says why time-slicing hurts.
    assert contention.evidence["profile"] == "1g.10gb"
    assert "a 1g.10gb MIG slice" in contention.advice and "or a GPU of its own" in contention.advice
    assert "time-slicing gives no isolation" in contention.advice
    # A performance finding: no hours wasted, nothing saved.
    assert (contention.waste, contention.savings) == (Decimal(0), Decimal(0))
    # The neighbour carries no latency-sensitive label: nothing to tell it.
    assert "time_slice_contention" not in found("pod-b")
    # Each pod holds half the GPU: billed half its hours.
    assert Charge.objects.get(kind="usage", job_ref="pod-a").gpu_hours == Decimal("1.5")
    assert_billing_invariants()
    assert_savings_within_spend()


@time_machine.travel("2026-11-04T00:00:00Z", tick=False)
def test_no_contention_finding_when_the_gpu_is_not_saturated_or_the_label_is_another(cast, settings):
    set_rate(H100, "2.00")
    declare(1)
    ingest(two_pods_on_one_gpu(sm=50.0, labels_a={"latency-sensitive": "true"}))
    findings_evaluate_all(now=EVAL)
    assert "time_slice_contention" not in found("pod-a")

    # The labels are a setting: with another one in force, a pod carrying only the default's is not advised.
    settings.GOVERNANCE_RULE_CONTENTION_SM_PERCENT = 40.0
    findings_evaluate_all(now=EVAL)
    assert found("pod-a")["time_slice_contention"].evidence["label"] == "latency-sensitive=true"
    settings.GOVERNANCE_RULE_LATENCY_SENSITIVE_LABELS = ["tier=realtime"]
    findings_evaluate_all(now=EVAL)
    assert found("pod-a")["time_slice_contention"].state == Finding.State.RESOLVED
    assert_billing_invariants()


@time_machine.travel("2026-11-04T00:00:00Z", tick=False)
def test_a_latency_sensitive_pod_alone_on_its_share_is_not_told_of_contention(cast):
    set_rate(H100, "2.00")
    declare(1)
    start = at("2026-11-03T00:00:00Z")
    ingest([
        job_record(job_id="pod-a", **NOV3, **END, gpus=0.5, labels={"workload-type": "inference"}),
        *series(start=start, minutes=180, every_s=120, job_id="pod-a", sm_util=97.0, mem_used_mib=8192.0),
    ])  # fmt: skip
    findings_evaluate_all(now=EVAL)
    assert "time_slice_contention" not in found("pod-a")
    assert_billing_invariants()


@time_machine.travel("2026-11-04T00:00:00Z", tick=False)
def test_a_whole_h100_job_whose_peaks_fit_three_sevenths_is_told_a_3g_slice_and_saves_four_sevenths(cast):
    set_rate(H100, "2.00")
    declare(1)
    ingest([
        job_record(job_id="small", **NOV3, **END, gpus=1),
        *series(start=at("2026-11-03T00:00:00Z"), minutes=180, every_s=300, job_id="small",
                sm_util=lambda s: 35.0 if s % 1800 == 0 else 30.0, mem_used_mib=12288.0),
    ])  # fmt: skip
    findings_evaluate_all(now=EVAL)

    fit = found("small")["whole_gpu_share_fit"]
    # SM peaked at 35% and memory at 12 GiB (x 1.2 = 14.4 GiB): 3g.40gb holds both (3/7 of the SMs).
    assert fit.evidence["profile"] == "3g.40gb"
    assert fit.evidence["sm_peak"] == 35.0
    assert "run it on a 3g.40gb MIG slice" in fit.advice
    # 3 h x 2.00 = 6.00 billed; the slice would cost 3/7 of it: 6.00 x 4/7 = 3.43 wasted, within the bill.
    assert cents(fit.waste) == Decimal("3.43")
    assert sum(f.waste for f in found("small").values()) <= Decimal(6)
    assert_billing_invariants()
    assert_savings_within_spend()


@time_machine.travel("2026-11-04T00:00:00Z", tick=False)
def test_a_whole_t4_job_whose_peaks_fit_a_quarter_is_told_four_time_slicing_replicas(cast):
    set_rate(T4, "1.00")
    declare(1, model=T4)
    ingest([
        job_record(job_id="t4", **NOV3, **END, gpus=1, gpu_model=T4),
        *series(start=at("2026-11-03T00:00:00Z"), minutes=180, every_s=300, job_id="t4", gpu_model=T4,
                sm_util=lambda s: 20.0 if s == 0 else 18.0, mem_used_mib=3072.0, mem_total_mib=T4_MIB),
    ])  # fmt: skip
    findings_evaluate_all(now=EVAL)

    fit = found("t4")["whole_gpu_share_fit"]
    # No MIG on a T4; its peaks (20% SM, 3 GiB x 1.2 of 15 GiB = 0.24) fit one of 4 replicas.
    assert (fit.evidence["profile"], fit.evidence["replicas"], fit.evidence["suggested_share"]) == (None, 4, 0.25)
    assert "one of 4 time-slicing replicas" in fit.advice and "request 0.25 of a GPU" in fit.advice
    assert cents(fit.waste) == Decimal("2.25")  # 3.00 x (1 - 0.25)
    assert_billing_invariants()
    assert_savings_within_spend()


@time_machine.travel("2026-11-04T00:00:00Z", tick=False)
def test_a_whole_gpu_job_that_peaks_over_half_is_not_told_a_share(cast):
    set_rate(H100, "2.00")
    declare(1)
    ingest([
        job_record(job_id="busy", **NOV3, **END, gpus=1),
        *series(start=at("2026-11-03T00:00:00Z"), minutes=180, every_s=300, job_id="busy",
                sm_util=lambda s: 70.0 if s == 3600 else 30.0, mem_used_mib=12288.0),
    ])  # fmt: skip
    findings_evaluate_all(now=EVAL)
    assert "whole_gpu_share_fit" not in found("busy")
    assert_billing_invariants()
