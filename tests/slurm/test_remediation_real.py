"""Remediation against the real Slurm of tests/slurm: the check's actions run the real `scontrol` against the real
slurmctld. Usage is fed as a collector would send it, and the check's rounds run at moments the test chooses (as in
tests/remediation, whose stand-ins record calls instead); the job ids are the real cluster's."""

from __future__ import annotations

import pytest

from governance.remediation.models import Remediation, RemediationStep
from tests.invariants import assert_billing_invariants
from tests.remediation.conftest import T0, idle_job, jobs, minutes, policy, rounds  # noqa: F401 (jobs: a fixture)


@pytest.fixture
def slurm(slurm_gres, monkeypatch):
    """The real cluster's CLI for the check: SLURM_CONF names it (scontrol and scancel are Debian's, on PATH)."""
    monkeypatch.setenv("SLURM_CONF", slurm_gres.env["SLURM_CONF"])
    return slurm_gres


def decisions(job_id: str) -> list[str]:
    return list(RemediationStep.objects.filter(case__job__external_id=job_id).order_by("at", "id")
                .values_list("decision", flat=True))  # fmt: skip


def test_an_idle_job_is_warned_twice_then_requeued_by_the_real_scontrol(jobs, slurm):  # noqa: F811
    job_id = slurm.submit("sleep 600", gpus=1, name="idle-train", extra=["--requeue"])
    slurm.wait_state(job_id, "RUNNING")
    idle_job(jobs, job_id)
    policy()

    rounds(jobs, [T0, T0 + minutes(15), T0 + minutes(30), T0 + minutes(45), T0 + minutes(60)], job_ids=(job_id,))

    try:
        assert decisions(job_id) == ["warn", "warn_again", "act"]
        act = RemediationStep.objects.get(case__job__external_id=job_id, decision="act")
        assert (act.command, act.result) == (f"scontrol requeue {job_id}", "exit 0")
        # slurmctld took it: the job is killed (COMPLETING a moment) and goes back to the queue, where Slurm holds a
        # requeued job a while before it may start again
        assert slurm.wait_state(job_id, "PENDING", "REQUEUED", "REQUEUE_HOLD", timeout=30)
        assert "Restarts=1" in slurm.cli(["scontrol", "show", "job", job_id]).stdout
        assert Remediation.objects.get().outcome == "acted"
    finally:
        slurm.cli(["scancel", job_id], check=False)
    assert_billing_invariants()


def test_a_job_that_goes_back_to_work_after_the_first_warning_keeps_running(jobs, slurm):  # noqa: F811
    job_id = slurm.submit("sleep 600", gpus=1, name="recovers")
    slurm.wait_state(job_id, "RUNNING")
    idle_job(jobs, job_id)
    policy()
    rounds(jobs, [T0], job_ids=(job_id,))

    rounds(jobs, [T0 + minutes(30), T0 + minutes(60), T0 + minutes(90)], job_ids=(job_id,), sm=60.0)

    try:
        assert decisions(job_id) == ["warn", "recovered"]
        assert slurm.state(job_id) == "RUNNING"
        assert "Restarts=0" in slurm.cli(["scontrol", "show", "job", job_id]).stdout
    finally:
        slurm.cli(["scancel", job_id], check=False)
