"""The periodic check: for each policy that is not off, each running job with a live finding of its condition
is warned, warned again, then acted on (or, under dry-run, recorded as if), unless it recovered, ended, is exempt,
or its data is stale. Every decision is a step with its evidence, on the audit log and in the finding's history.

The clock is a parameter (`now`), so the sequence is tested without waiting.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from governance.api.audit import audit_entry_write
from governance.api.models import AuditEntry
from governance.efficiency.models import LIVE_STATES, Finding, FindingEvent
from governance.efficiency.thresholds import thresholds_from_settings
from governance.fleet.models import Gpu
from governance.remediation.conditions import OVERALLOCATED, HourRow, Verdict, condition_check
from governance.remediation.executors import ActionResult, slurm_act, slurm_command
from governance.remediation.kubernetes_api import KubernetesApi, pod_remediate
from governance.remediation.models import Remediation, RemediationPolicy, RemediationStep
from governance.remediation.notices import step_announce
from governance.remediation.reclaim import reclaim_of
from governance.remediation.scope import exemption, in_scope, namespace_of
from governance.usage.models import Job, JobGpuHour

D, S, OUT = RemediationStep.Decision, Remediation.Stage, Remediation.Outcome
Mode = RemediationPolicy.Mode
HOUR = timedelta(hours=1)
# A step that only says "still waiting" is recorded once per wait, not at every round.
WAITS = {D.STALE, D.QUIET, D.LIMIT}


@dataclass
class CheckResult:
    policies: int = 0
    steps: int = 0


def _rule(policy: RemediationPolicy) -> str:
    return "overallocated" if policy.condition == OVERALLOCATED else "idle_gpu"


def _rows(job: Job) -> list[HourRow]:
    hours = JobGpuHour.objects.filter(job=job).select_related("gpu__node")
    return [HourRow(f"{h.gpu.node.name}:{h.gpu.index}", h.hour, h.samples, h.sm_samples, h.sm_sum) for h in hours]


def _last_seen(job: Job) -> datetime | None:
    gpu_ids = JobGpuHour.objects.filter(job=job).values("gpu_id")
    return Gpu.objects.filter(pk__in=gpu_ids).aggregate(at=Max("last_seen_at"))["at"]


def _quiet(policy: RemediationPolicy, now: datetime) -> bool:
    start, end = policy.quiet_start_hour, policy.quiet_end_hour
    if start is None or end is None or start == end:
        return False
    return start <= now.hour < end if start < end else (now.hour >= start or now.hour < end)


def _scoped(policy: RemediationPolicy, job: Job, teams: list[str]) -> bool:
    labels = job.labels or {}
    return in_scope(
        team=job.project.team.slug if job.project else None, teams=teams,
        partition=str(labels.get("partition", "")), partitions=policy.partitions,
        namespace=namespace_of(job.external_id), namespaces=policy.namespaces,
    )  # fmt: skip


def _exempt(policy: RemediationPolicy, job: Job) -> str:
    labels = {k: str(v) for k, v in (job.labels or {}).items()}
    name = labels.get("name", "") or job.external_id.rpartition("/")[2]
    return exemption(
        user=job.user_name, name=name, labels=labels, exempt_users=policy.exempt_users,
        exempt_labels=policy.exempt_labels, exempt_job_names=policy.exempt_job_names,
    )  # fmt: skip


def _step(case: Remediation, decision: str, now: datetime, evidence: dict, **fields: object) -> RemediationStep:
    step = RemediationStep.objects.create(
        case=case, at=now, decision=decision, dry_run=case.dry_run, evidence=evidence, deadline=case.deadline,
        **fields,
    )  # fmt: skip
    changes = {k: [None, v] for k, v in {
        "policy": case.policy.name, "mode": case.policy.mode, "job": str(case.job), "decision": decision,
        "dry_run": case.dry_run, "deadline": case.deadline.isoformat() if case.deadline else None,
        "evidence": evidence, "command": step.command, "result": step.result,
        "reclaimed_gpu_hours": str(step.gpu_hours), "reclaimed_cost": str(step.cost),
    }.items()}  # fmt: skip
    audit_entry_write(
        action=AuditEntry.Action.CREATE, model="remediation.remediationstep", object_pk=step.pk,
        object_repr=str(step), changes=changes,
    )  # fmt: skip
    if case.finding_id is not None:
        finding = case.finding
        assert finding is not None
        dry = " (dry run: nothing done)" if case.dry_run else ""
        FindingEvent.objects.create(
            finding=finding, verb=FindingEvent.Verb.REMEDIATION, from_state=finding.state, to_state=finding.state,
            reason=f"{case.policy.name}: {step.get_decision_display()}{dry}. {evidence.get('why', '')} "
            f"{step.command} {step.result}".strip()[:2000], at=now,
        )  # fmt: skip
    step_announce(step)
    return step


def _close(case: Remediation, outcome: str, now: datetime) -> None:
    case.stage, case.outcome, case.closed_at = S.CLOSED, outcome, now
    case.save(update_fields=["stage", "outcome", "closed_at"])


def _execute(policy: RemediationPolicy, job: Job, dry_run: bool) -> ActionResult:
    if policy.scheduler == policy.Scheduler.KUBERNETES:
        if dry_run:
            return ActionResult(f"scale the owner of pod {job.external_id} to zero, or delete it", True, "dry run")
        return pod_remediate(api=KubernetesApi.from_settings(policy.api_url), job_id=job.external_id)
    if dry_run:
        try:
            return ActionResult(" ".join(slurm_command(action=policy.slurm_action, job_id=job.external_id)), True,
                                "dry run: not run")  # fmt: skip
        except ValueError as exc:
            return ActionResult("", False, str(exc))
    return slurm_act(action=policy.slurm_action, job_id=job.external_id)


def _act(case: Remediation, now: datetime, evidence: dict, rows: list[HourRow]) -> None:
    policy, job = case.policy, case.job
    recent = [r for r in rows if r.hour >= now - timedelta(hours=float(policy.idle_hours)) - HOUR]
    gpus = job.gpus or len({r.gpu for r in recent}) or 1
    result = _execute(policy, job, case.dry_run)
    if not result.ok:
        _step(case, D.FAILED, now, evidence, command=result.command[:500], result=result.output)
        _close(case, OUT.FAILED, now)
        return
    reclaim = reclaim_of(job=job, at=now, gpus=gpus)
    evidence = evidence | {"reclaim_basis": reclaim.basis}
    _step(case, D.ACT, now, evidence, command=result.command[:500], result=result.output, gpu_hours=reclaim.gpu_hours,
          cost=reclaim.cost, currency=reclaim.currency)  # fmt: skip
    case.reclaimed_gpu_hours, case.reclaimed_cost, case.currency = reclaim.gpu_hours, reclaim.cost, reclaim.currency
    case.save(update_fields=["reclaimed_gpu_hours", "reclaimed_cost", "currency"])
    if case.dry_run:  # nothing was done: keep watching the job, without warning it again
        case.stage = S.DUE
        case.save(update_fields=["stage"])
    else:
        _close(case, OUT.ACTED, now)


def _waiting(case: Remediation | None, decision: str, now: datetime, evidence: dict) -> int:
    if case is None:
        return 0
    last = case.steps.order_by("-at", "-id").first()
    if last is not None and last.decision == decision:
        return 0
    _step(case, decision, now, evidence)
    return 1


def _limit_reached(policy: RemediationPolicy, now: datetime, dry_run: bool) -> bool:
    done = RemediationStep.objects.filter(
        case__policy__cluster_id=policy.cluster_id, decision=D.ACT, dry_run=dry_run, at__gt=now - HOUR, at__lte=now
    ).count()
    return done >= policy.max_actions_per_hour


def _job_check(policy: RemediationPolicy, job: Job, finding: Finding | None, now: datetime, teams: list[str]) -> int:
    case = Remediation.objects.filter(policy=policy, job=job).exclude(stage=S.CLOSED).first()
    dry_run = policy.mode == Mode.DRY_RUN
    if case is not None and case.dry_run != dry_run:  # the mode changed: a dry case never turns into real warnings
        _step(case, D.ENDED, now, {"why": f"the policy's mode is now {policy.mode}"})
        _close(case, OUT.SUPERSEDED, now)
        case = None
    if job.state != Job.State.RUNNING or job.end_time is not None:
        if case is None:
            return 0
        _step(case, D.ENDED, now, {"why": f"the job is {job.state}"})
        _close(case, OUT.ENDED, now)
        return 1
    if not _scoped(policy, job, teams):
        return 0
    if why := _exempt(policy, job):
        if case is None:
            if Remediation.objects.filter(policy=policy, job=job, outcome=OUT.EXEMPT).exists():
                return 0
            case = Remediation.objects.create(policy=policy, job=job, finding=finding, dry_run=dry_run,
                                              stage=S.WARNED_ONCE, opened_at=now)  # fmt: skip
        _step(case, D.EXEMPT, now, {"why": why})
        _close(case, OUT.EXEMPT, now)
        return 1
    last_seen = _last_seen(job)
    stale_after = timedelta(minutes=settings.REMEDIATION_STALE_AFTER_MINUTES)
    if last_seen is None or last_seen < now - stale_after:
        seen = last_seen.isoformat() if last_seen else "never"
        why = f"no data since {seen}: the collector is silent"
        return _waiting(case, D.STALE, now, {"why": why, "last_seen": seen})
    rows = _rows(job)
    verdict: Verdict = condition_check(
        condition=policy.condition, rows=rows, now=now, idle_hours=float(policy.idle_hours),
        idle_sm=thresholds_from_settings().idle_sm_percent, started_at=job.start_time, labels=job.labels or {},
    )  # fmt: skip
    evidence = verdict.evidence | {"why": verdict.why, "last_seen": last_seen.isoformat()}
    if not verdict.holds:
        if case is None:
            return 0
        _step(case, D.RECOVERED, now, evidence)
        _close(case, OUT.RECOVERED, now)
        return 1
    grace, window = timedelta(minutes=policy.grace_minutes), timedelta(hours=float(policy.idle_hours))
    due = case is None or (case.stage == S.WARNED_ONCE and now >= case.first_warned_at + grace)  # type: ignore[operator]
    due = due or (case is not None and case.stage == S.WARNED_TWICE and now >= case.deadline)  # type: ignore[operator]
    if not due:
        return 0
    if _quiet(policy, now):
        return _waiting(case, D.QUIET, now, evidence)
    if case is None:
        if Remediation.objects.filter(policy=policy, job=job, outcome=OUT.ACTED, closed_at__gt=now - window).exists():
            return 0  # acted on within the window: what the rollups show since is not yet the requeued job's own
        case = Remediation.objects.create(
            policy=policy, job=job, finding=finding, dry_run=dry_run, stage=S.WARNED_ONCE, opened_at=now,
            first_warned_at=now, deadline=now + 2 * grace,
        )  # fmt: skip
        _step(case, D.WARN, now, evidence)
    elif case.stage == S.WARNED_ONCE:
        case.stage, case.second_warned_at = S.WARNED_TWICE, now
        case.deadline = max(case.deadline or now, now + grace)  # a deferred second warning still leaves the grace
        case.save(update_fields=["stage", "second_warned_at", "deadline"])
        _step(case, D.WARN_AGAIN, now, evidence)
    elif policy.mode == Mode.NOTIFY:
        case.stage = S.DUE
        case.save(update_fields=["stage"])
        _step(case, D.DUE, now, evidence)
    elif _limit_reached(policy, now, dry_run):
        return _waiting(case, D.LIMIT, now, evidence | {"limit": policy.max_actions_per_hour})
    else:
        _act(case, now, evidence, rows)
    return 1


def _candidates(policy: RemediationPolicy) -> list[tuple[Job, Finding | None]]:
    live = (
        Finding.objects.filter(rule=_rule(policy), state__in=LIVE_STATES, job__cluster_id=policy.cluster_id)
        .select_related("job__cluster", "job__project__team")
        .order_by("job_id")
    )
    found: dict[int, tuple[Job, Finding | None]] = {f.job_id: (f.job, f) for f in live}
    open_cases = (
        Remediation.objects.filter(policy=policy).exclude(stage=S.CLOSED)
        .select_related("job__cluster", "job__project__team", "finding")
    )  # fmt: skip
    for case in open_cases:
        found.setdefault(case.job_id, (case.job, case.finding))
    return [found[k] for k in sorted(found)]


def remediation_check(*, now: datetime | None = None) -> CheckResult:
    """One round over every policy that is not off. A policy is checked by one round at a time (its row is locked;
    a round that finds it locked skips it)."""
    now = now or timezone.now()
    result = CheckResult()
    for policy_id in RemediationPolicy.objects.exclude(mode=Mode.OFF).values_list("pk", flat=True):
        with transaction.atomic():
            policy = (
                RemediationPolicy.objects.select_for_update(skip_locked=True, of=("self",))
                .select_related("cluster").filter(pk=policy_id).exclude(mode=Mode.OFF).first()
            )  # fmt: skip
            if policy is None:
                continue
            result.policies += 1
            teams = list(policy.teams.values_list("slug", flat=True))
            for job, finding in _candidates(policy):
                with transaction.atomic():
                    result.steps += _job_check(policy, job, finding, now, teams)
    return result
