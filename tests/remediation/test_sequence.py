"""The warn-warn-act sequence against `scontrol`/`scancel` stand-ins on PATH that record their calls (cheap, and able
to fail on demand; tests/slurm/test_remediation_real.py runs the same sequence against the real Slurm): rounds of the
check run at moments the test chooses, samples fed between."""

from __future__ import annotations

from decimal import Decimal

import pytest

from governance.api.models import AuditEntry
from governance.efficiency.models import Finding
from governance.lib.months import Month
from governance.notify.models import OutboxMessage
from governance.remediation.models import Remediation, RemediationStep
from governance.remediation.selectors import dry_run_report, reclaimed_cluster_month, reclaimed_team_month
from governance.remediation.services import remediation_check
from tests.invariants import assert_billing_invariants
from tests.remediation.conftest import T0, idle_job, minutes, policy, rounds


def decisions(job_id: str = "4242") -> list[tuple[str, bool]]:
    steps = RemediationStep.objects.filter(case__job__external_id=job_id).order_by("at", "id")
    return [(s.decision, s.dry_run) for s in steps]


@pytest.fixture
def emails(cast):
    for user, address in ((cast.alice, "alice@example.com"), (cast.nlp_lead, "lead@example.com")):
        user.email = address
        user.save()


def test_an_idle_job_is_warned_twice_then_requeued_and_the_reclaimed_hours_are_on_the_team_month(jobs, slurm, emails):
    idle_job(jobs)
    policy()

    rounds(jobs, [T0, T0 + minutes(15), T0 + minutes(30), T0 + minutes(45), T0 + minutes(60)])

    assert decisions() == [("warn", False), ("warn_again", False), ("act", False)]
    assert slurm.calls == ["scontrol requeue 4242"]
    case = Remediation.objects.get()
    assert (case.outcome, case.first_warned_at, case.second_warned_at) == ("acted", T0, T0 + minutes(30))
    act = case.steps.get(decision="act")
    assert (act.command, act.result) == ("scontrol requeue 4242", "exit 0")
    # 1 GPU from 13:05 to the time limit at 23:05, at the 2.00 USD the ledger billed the job per GPU-hour
    assert (act.gpu_hours, act.cost, act.currency) == (Decimal("10.0000"), Decimal("20.00"), "USD")
    month = Month.of(T0)
    team = reclaimed_team_month(team_id=case.job.project.team_id, month=month)
    cluster = reclaimed_cluster_month(cluster_id=case.job.cluster_id, month=month)
    assert (team.gpu_hours, team.cost, team.actions) == (Decimal("10.0000"), Decimal("20.00"), 1) == (
        cluster.gpu_hours, cluster.cost, cluster.actions)  # fmt: skip
    assert_billing_invariants()


def test_the_warnings_carry_the_evidence_and_the_deadline_to_the_owner_and_the_lead(jobs, slurm, emails):
    idle_job(jobs)
    policy()

    rounds(jobs, [T0, T0 + minutes(30)])

    warnings = OutboxMessage.objects.filter(event="remediation.warning").order_by("id")
    assert sorted({m.destination for m in warnings}) == ["email:alice@example.com", "email:lead@example.com"]
    first = warnings.first()
    assert first.payload["deadline"] == (T0 + minutes(60)).isoformat()
    assert first.payload["evidence"]["gpus"] == [{"gpu": "node-4242:0", "sm_mean": 0.0}]
    assert first.payload["evidence"]["window_start"] == "2026-11-03T10:00:00+00:00"
    assert "First warning" in first.text and "by 2026-11-03 13:05 UTC" in first.text and "requeued" in first.text
    assert "Second and last warning" in warnings.last().text


def test_every_decision_is_on_the_audit_log_and_in_the_findings_history(jobs, slurm):
    idle_job(jobs)
    policy()

    rounds(jobs, [T0, T0 + minutes(30), T0 + minutes(60)])

    entries = AuditEntry.objects.filter(door="command", model="remediation.remediationstep").order_by("at", "id")
    assert [e.changes["decision"][1] for e in entries] == ["warn", "warn_again", "act"]
    assert entries.last().changes["command"] == [None, "scontrol requeue 4242"]
    assert {e.where for e in entries} == {"remediation_check"}
    finding = Finding.objects.get(rule="idle_gpu")
    history = [e.reason for e in finding.events.filter(verb="remediation").order_by("at", "id")]
    assert len(history) == 3 and history[-1].startswith("idle-c1: Action.") and "scontrol requeue 4242" in history[-1]


def test_a_job_that_starts_working_after_the_first_warning_is_left_alone(jobs, slurm, emails):
    idle_job(jobs)
    policy()
    rounds(jobs, [T0])

    rounds(jobs, [T0 + minutes(30), T0 + minutes(60), T0 + minutes(90)], sm=60.0)

    assert decisions() == [("warn", False), ("recovered", False)]
    assert slurm.calls == []
    assert Remediation.objects.get().outcome == "recovered"
    assert OutboxMessage.objects.filter(event="remediation.recovered").count() == 2  # the owner and the lead


def test_an_exempt_job_is_never_touched(jobs, slurm):
    idle_job(jobs, labels={"kind": "training", "keep": "yes"})
    policy(exempt_labels=["keep=yes"])

    rounds(jobs, [T0, T0 + minutes(30), T0 + minutes(60), T0 + minutes(90)])

    assert decisions() == [("exempt", False)]
    assert slurm.calls == []
    assert not OutboxMessage.objects.filter(event__startswith="remediation.").exists()


def test_dry_run_changes_nothing_and_records_what_it_would_have_done(jobs, slurm, cast):
    idle_job(jobs)
    policy(mode="dry_run")

    rounds(jobs, [T0, T0 + minutes(30), T0 + minutes(60), T0 + minutes(90), T0 + minutes(120)])

    assert decisions() == [("warn", True), ("warn_again", True), ("act", True)]
    assert slurm.calls == []
    assert not OutboxMessage.objects.filter(event__startswith="remediation.").exists()
    case = Remediation.objects.get()
    assert (case.stage, case.job.state) == ("due", "running")
    assert case.steps.get(decision="act").command == "scontrol requeue 4242"
    assert reclaimed_team_month(team_id=cast.nlp.pk, month=Month.of(T0)).actions == 0
    [line] = dry_run_report(user=cast.nlp_lead, now=T0 + minutes(120))
    assert (line.policy, line.warnings, line.actions, line.gpu_hours, line.cost) == (
        "idle-c1", 2, 1, Decimal("10.0000"), Decimal("20.00"))  # fmt: skip

    policy(mode="act")  # with that evidence, the team turns it on: the warnings start over, for real
    rounds(jobs, [T0 + minutes(135)])
    assert decisions()[-2:] == [("ended", True), ("warn", False)]
    assert Remediation.objects.get(dry_run=True).outcome == "superseded"


def test_the_per_hour_limit_holds_across_the_clusters_jobs(jobs, slurm):
    idle_job(jobs, "101", "102", "103")
    policy(max_actions_per_hour=2)
    ids = ("101", "102", "103")

    rounds(jobs, [T0, T0 + minutes(30), T0 + minutes(60)], job_ids=ids)
    assert sorted(slurm.calls) == ["scontrol requeue 101", "scontrol requeue 102"]
    assert decisions("103")[-1] == ("limit", False)

    rounds(jobs, [T0 + minutes(90), T0 + minutes(125)], job_ids=ids)
    assert sorted(slurm.calls) == ["scontrol requeue 101", "scontrol requeue 102", "scontrol requeue 103"]
    assert decisions("103") == [("warn", False), ("warn_again", False), ("limit", False), ("act", False)]


def test_stale_data_stops_the_sequence_until_the_collector_reports_again(jobs, slurm):
    idle_job(jobs)
    policy()
    rounds(jobs, [T0])

    for moment in (T0 + minutes(30), T0 + minutes(60)):  # no samples: the collector is silent
        remediation_check(now=moment)

    assert decisions() == [("warn", False), ("stale", False)]
    assert slurm.calls == []
    rounds(jobs, [T0 + minutes(75)])
    assert decisions()[-1] == ("warn_again", False)


def test_quiet_hours_hold_the_warnings_back_until_they_end(jobs, slurm):
    idle_job(jobs)
    policy(quiet_start_hour=12, quiet_end_hour=13)

    rounds(jobs, [T0, T0 + minutes(30), T0 + minutes(60)])

    assert decisions() == [("warn", False)]
    assert RemediationStep.objects.get().at == T0 + minutes(60)


def test_a_failed_command_is_recorded_with_its_output_and_the_case_closed(jobs, slurm):
    idle_job(jobs)
    policy(slurm_action="cancel")
    slurm.write(fail=True)

    rounds(jobs, [T0, T0 + minutes(30), T0 + minutes(60)])

    failed = RemediationStep.objects.get(decision="failed")
    assert failed.command == "scancel 4242"
    assert failed.result == "exit 1: slurm_requeue error: Job is no longer pending"
    assert Remediation.objects.get().outcome == "failed"
