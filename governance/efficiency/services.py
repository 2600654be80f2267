"""Writes for findings: evaluate jobs (open, refresh, resolve), and the people's state changes."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from governance.efficiency.models import LIVE_STATES, Finding, JobEvaluation
from governance.efficiency.rules import rules_evaluate
from governance.efficiency.selectors import job_bills, job_summaries
from governance.efficiency.thresholds import thresholds_from_settings
from governance.efficiency.waste import waste_allocate
from governance.lib.money import to_cents
from governance.org.models import User
from governance.usage.models import Job

logger = logging.getLogger(__name__)

CHUNK = 200
REASON_REQUIRED = "reason: say why the finding is dismissed"
NOT_LIVE = "state: only an open or acknowledged finding can change state (this one is {state})"


class FindingStateError(ValueError):
    """A state change the finding's current state does not allow, or one missing its reason."""


@dataclass
class Evaluation:
    jobs: int = 0
    opened: int = 0
    refreshed: int = 0
    resolved: int = 0


def _chunks(ids: Iterable[int]) -> Iterator[list[int]]:
    ids = list(ids)
    for i in range(0, len(ids), CHUNK):
        yield ids[i : i + CHUNK]


def findings_evaluate(*, job_ids: Iterable[int], now: datetime | None = None, final: bool = False) -> Evaluation:
    """Run every rule on the jobs: open new findings, refresh live ones, resolve those that no longer fire.

    A dismissed finding stays dismissed: the rule firing again on the same job opens nothing new.
    """
    now = now or timezone.now()
    thresholds = thresholds_from_settings()
    result = Evaluation()
    for chunk in _chunks(job_ids):
        summaries = job_summaries(job_ids=chunk, now=now)
        bills = job_bills(job_ids=chunk)
        with transaction.atomic():
            # Locking the jobs' evaluation rows makes two workers on the same job take turns.
            JobEvaluation.objects.bulk_create(
                [JobEvaluation(job_id=pk, evaluated_at=now) for pk in chunk], ignore_conflicts=True
            )
            list(JobEvaluation.objects.select_for_update().filter(job_id__in=chunk).order_by("job_id"))
            existing: dict[tuple[int, str], Finding] = {}
            dismissed: set[tuple[int, str]] = set()
            for f in Finding.objects.filter(job_id__in=chunk).filter(Q(state__in=LIVE_STATES) | Q(state="dismissed")):
                if f.state == Finding.State.DISMISSED:
                    dismissed.add((f.job_id, f.rule))
                else:
                    existing[(f.job_id, f.rule)] = f
            fired: set[tuple[int, str]] = set()
            new: list[Finding] = []
            for summary in summaries:
                drafts = rules_evaluate(summary, thresholds)
                bill = bills.get(summary.job_id)
                wastes = waste_allocate({d.rule: d.wasted_hours for d in drafts}, bill.days if bill else {})
                for draft in drafts:
                    key = (summary.job_id, draft.rule)
                    fired.add(key)
                    waste = wastes[draft.rule]
                    values = {
                        "severity": draft.severity,
                        "evidence": draft.evidence,
                        "waste": waste.money,
                        "wasted_gpu_hours": round(waste.hours, 4),
                        "savings": to_cents(draft.savings),
                        "currency": bill.currency if bill else draft.currency,
                        "advice": draft.advice,
                    }
                    if key in existing:
                        Finding.objects.filter(pk=existing[key].pk).update(**values, updated_at=now)
                        result.refreshed += 1
                    elif key not in dismissed:
                        new.append(Finding(job_id=summary.job_id, rule=draft.rule, **values))
            Finding.objects.bulk_create(new)
            result.opened += len(new)
            stale = [f.pk for key, f in existing.items() if key not in fired]
            result.resolved += Finding.objects.filter(pk__in=stale).update(
                state=Finding.State.RESOLVED, resolved_at=now, updated_at=now
            )
            JobEvaluation.objects.filter(job_id__in=chunk).update(evaluated_at=now)
            if final:
                JobEvaluation.objects.filter(job_id__in=chunk).update(final_at=now)
            new_ids = [f.pk for f in new]
            if new_ids:
                transaction.on_commit(lambda ids=new_ids: _announce(ids))
        result.jobs += len(summaries)
    return result


def _announce(finding_ids: list[int]) -> None:
    from governance.efficiency.tasks import announce_finding

    for pk in finding_ids:
        try:
            announce_finding.delay(pk)
        except Exception:  # broker down: the finding is stored; only its webhook is late or lost
            logger.warning("could not enqueue the webhook for finding %s", pk, exc_info=True)


def findings_evaluate_running(*, now: datetime | None = None) -> Evaluation:
    """The periodic pass over jobs still running."""
    ids = Job.objects.filter(end_time__isnull=True, start_time__isnull=False).values_list("pk", flat=True)
    return findings_evaluate(job_ids=ids, now=now)


def findings_evaluate_priced(*, job_ids: Iterable[int], now: datetime | None = None) -> Evaluation:
    """After pricing: re-evaluate the priced jobs that have findings, so their waste follows the new ledger rows.
    Jobs without findings wait for their periodic pass."""
    ids = list(Finding.objects.filter(job_id__in=list(job_ids)).values_list("job_id", flat=True).distinct())
    return findings_evaluate(job_ids=ids, now=now)


def findings_evaluate_ended(*, now: datetime | None = None) -> Evaluation:
    """The last pass over jobs that ended long enough ago for their last samples to be in; once per job."""
    now = now or timezone.now()
    cutoff = now - timedelta(minutes=settings.GOVERNANCE_FINDINGS_FINAL_DELAY_MINUTES)
    ids = (
        Job.objects.filter(end_time__isnull=False, end_time__lte=cutoff, start_time__isnull=False)
        .exclude(evaluation__final_at__isnull=False)
        .values_list("pk", flat=True)
    )
    return findings_evaluate(job_ids=list(ids), now=now, final=True)


def findings_evaluate_all(*, now: datetime | None = None) -> Evaluation:
    """Every started job at once (the operator's command); jobs ended past the delay count as finally evaluated."""
    now = now or timezone.now()
    cutoff = now - timedelta(minutes=settings.GOVERNANCE_FINDINGS_FINAL_DELAY_MINUTES)
    started = Job.objects.filter(start_time__isnull=False)
    ended = findings_evaluate(
        job_ids=list(started.filter(end_time__lte=cutoff).values_list("pk", flat=True)), now=now, final=True
    )
    rest = findings_evaluate(job_ids=list(started.exclude(end_time__lte=cutoff).values_list("pk", flat=True)), now=now)
    return Evaluation(
        jobs=ended.jobs + rest.jobs,
        opened=ended.opened + rest.opened,
        refreshed=ended.refreshed + rest.refreshed,
        resolved=ended.resolved + rest.resolved,
    )


def _change(*, finding_id: int, user: User, state: str, reason: str = "") -> Finding:
    with transaction.atomic():
        finding = Finding.objects.select_for_update().get(pk=finding_id)
        if finding.state not in LIVE_STATES:
            raise FindingStateError(NOT_LIVE.format(state=finding.state))
        finding.state = state
        finding.state_changed_by = user
        finding.dismissed_reason = reason
        finding.save(update_fields=["state", "state_changed_by", "dismissed_reason", "updated_at"])
    return finding


def finding_acknowledge(*, finding_id: int, user: User) -> Finding:
    return _change(finding_id=finding_id, user=user, state=Finding.State.ACKNOWLEDGED)


def finding_dismiss(*, finding_id: int, user: User, reason: str) -> Finding:
    reason = (reason or "").strip()
    if not reason:
        raise FindingStateError(REASON_REQUIRED)
    return _change(finding_id=finding_id, user=user, state=Finding.State.DISMISSED, reason=reason)
