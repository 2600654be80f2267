"""What the job's owner and the team's lead are told at each step: the evidence, the deadline, what will be done
and how to avoid it. Through the outbox (governance/notify), to their emails and the destinations every event
goes to; dry-run steps tell nobody.
"""

from __future__ import annotations

from governance.lib.format import hours, money
from governance.notify.delivery import EMAIL
from governance.notify.services import notification_enqueue
from governance.org.models import User
from governance.org.selectors import team_lead_emails
from governance.remediation.models import Remediation, RemediationStep

D = RemediationStep.Decision
EVENTS: dict[str, str] = {
    D.WARN: "remediation.warning", D.WARN_AGAIN: "remediation.warning", D.ACT: "remediation.action",
    D.FAILED: "remediation.failed", D.RECOVERED: "remediation.recovered", D.DUE: "remediation.due",
}  # fmt: skip


def what_will_be_done(case: Remediation) -> str:
    policy = case.policy
    if policy.mode != policy.Mode.ACT:
        return "nothing will be done to the job (the policy only warns)"
    if policy.scheduler == policy.Scheduler.KUBERNETES:
        return "its Deployment or StatefulSet will be scaled to zero (a bare pod deleted)"
    return "it will be requeued (scontrol requeue)" if policy.slurm_action == "requeue" else "it will be cancelled"


def step_text(step: RemediationStep) -> str:
    case, job = step.case, step.case.job
    idle = ", ".join(f"{g['gpu']} at {g['sm_mean']}% SM" for g in step.evidence.get("gpus", []))
    window = f"{step.evidence.get('window_start', '?')} to {step.evidence.get('window_end', '?')}"
    head = f"GPU job {job.external_id} on {job.cluster.name} ({job.user_name}), policy {case.policy.name}"
    if step.decision in (D.WARN, D.WARN_AGAIN):
        n = "First" if step.decision == D.WARN else "Second and last"
        return (
            f"{n} warning: {head}: {step.evidence.get('why', '')} ({idle}; {window}). Unless the GPUs start "
            f"working or the job ends by {step.deadline:%Y-%m-%d %H:%M} UTC, {what_will_be_done(case)}. "
            "To keep it: use the GPUs, end the job yourself, or ask an admin for an exemption."
        )
    if step.decision == D.ACT:
        return (
            f"Action taken: {head}: `{step.command}`: {step.result}. Reclaimed {hours(step.gpu_hours)} GPU-hours, "
            f"{money(step.cost, step.currency)} ({step.evidence.get('reclaim_basis', '')})."
        )
    if step.decision == D.FAILED:
        return f"Action failed: {head}: `{step.command}`: {step.result}."
    if step.decision == D.DUE:
        return f"Deadline passed: {head}: still idle ({idle}); the policy only warns, so nothing was done."
    return f"No action: {head}: the job recovered ({step.evidence.get('why', '')}); the warnings are withdrawn."


def step_payload(step: RemediationStep) -> dict:
    case, job = step.case, step.case.job
    return {
        "case_id": case.pk, "policy": case.policy.name, "mode": case.policy.mode, "decision": step.decision,
        "job_id": job.external_id, "cluster": job.cluster.name, "user": job.user_name,
        "team": job.project.team.slug if job.project else None, "at": step.at.isoformat(),
        "first_warned_at": case.first_warned_at.isoformat() if case.first_warned_at else None,
        "second_warned_at": case.second_warned_at.isoformat() if case.second_warned_at else None,
        "deadline": step.deadline.isoformat() if step.deadline else None, "evidence": step.evidence,
        "command": step.command, "result": step.result, "reclaimed_gpu_hours": str(step.gpu_hours),
        "reclaimed_cost": str(step.cost), "currency": step.currency,
    }  # fmt: skip


def recipients(case: Remediation) -> list[str]:
    job = case.job
    owner = User.objects.filter(username=job.user_name, is_active=True).exclude(email="")
    owner_emails = owner.values_list("email", flat=True)
    leads = team_lead_emails(team=job.project.team) if job.project else []
    return [f"{EMAIL}{address}" for address in dict.fromkeys([*owner_emails, *leads])]


def step_announce(step: RemediationStep) -> None:
    if step.dry_run or step.decision not in EVENTS:
        return
    to = recipients(step.case)
    notification_enqueue(event=EVENTS[step.decision], payload=step_payload(step), text=step_text(step), destinations=to)
