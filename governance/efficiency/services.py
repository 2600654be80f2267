"""Writes for findings: evaluate jobs (open, refresh, resolve), and the people's state changes."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Protocol

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from governance.efficiency.models import LIVE_STATES, Finding, FindingEvent, JobEvaluation
from governance.efficiency.notifications import finding_payload, finding_text
from governance.efficiency.rules import rules_evaluate
from governance.efficiency.rules.base import pct
from governance.efficiency.selectors import cluster_stats, job_bills, job_clusters, job_summaries
from governance.efficiency.summary import JobSummary
from governance.efficiency.thresholds import thresholds_from_settings
from governance.efficiency.waste import savings_allocate, savings_window_start, waste_allocate
from governance.notify.services import notification_enqueue, notify_destinations
from governance.org.models import User
from governance.usage.models import Job

logger = logging.getLogger(__name__)

CHUNK = 200
REASON_REQUIRED = "reason: say why the finding is dismissed"
NOT_LIVE = "state: only an open or acknowledged finding can change state (this one is {state})"
NOT_CLOSED = "state: only a resolved or dismissed finding can be reopened (this one is {state})"
ANOTHER_LIVE = "state: the job has another live {rule} finding; that one stands for it"
NO_LONGER_FIRES = "no longer fires: mean SM {sm}"
FIRES_AGAIN = "fires again"


class FindingStateError(ValueError):
    """A state change the finding's current state does not allow, or one missing its reason."""


@dataclass
class Evaluation:
    jobs: int = 0
    opened: int = 0
    refreshed: int = 0
    resolved: int = 0
    reopened: int = 0


@dataclass(frozen=True)
class Change:
    finding_id: int
    verb: str
    from_state: str
    to_state: str
    reason: str = ""
    by_id: int | None = None


def _chunks(ids: Iterable[int]) -> Iterator[list[int]]:
    ids = list(ids)
    for i in range(0, len(ids), CHUNK):
        yield ids[i : i + CHUNK]


def _no_longer(summary: JobSummary) -> str:
    return NO_LONGER_FIRES.format(sm=pct(summary.sm_mean))


def _findings_of(chunk: list[int]) -> QuerySet[Finding]:
    """The findings of a chunk of sorted job ids, newest first per job and rule.

    The range the chunk spans, beside its ids, keeps PostgreSQL on the job index where the findings table has no
    statistics yet (a new install's first pass; findings this transaction wrote). Without them it guesses 0.5% of
    the table per listed id, the whole table for a chunk, and read it whole for every chunk of a 25,600-job pass
    (a fifth of the pass)."""
    in_range = Finding.objects.filter(job_id__gte=chunk[0], job_id__lte=chunk[-1])
    return in_range.filter(job_id__in=chunk).order_by("job_id", "rule", "-id")


def findings_evaluate(*, job_ids: Iterable[int], now: datetime | None = None, final: bool = False) -> Evaluation:
    """Run every rule on the jobs: open new findings, refresh live ones (their waste from the job's ledger rows),
    resolve those that no longer fire, reopen those the rules resolved once they fire again.

    A finding a person dismissed or resolved keeps its state; its waste is still counted, so that the hours it
    claims go to no other finding.
    """
    now = now or timezone.now()
    since = savings_window_start(now)
    thresholds = thresholds_from_settings()
    result = Evaluation()
    job_ids = sorted(set(job_ids))  # each chunk a narrow range of ids: see the findings read below
    # The clusters' statistics once for the whole pass: per chunk they would cost the pass the square of the fleet.
    stats = cluster_stats(cluster_ids=job_clusters(job_ids=job_ids), now=now) if job_ids else None
    for chunk in _chunks(job_ids):
        summaries = job_summaries(job_ids=chunk, now=now, stats=stats)
        bills = job_bills(job_ids=chunk)
        with transaction.atomic():
            # Locking the jobs' evaluation rows makes two workers on the same job take turns.
            JobEvaluation.objects.bulk_create(
                [JobEvaluation(job_id=pk, evaluated_at=now) for pk in chunk], ignore_conflicts=True
            )
            list(JobEvaluation.objects.select_for_update().filter(job_id__in=chunk).order_by("job_id"))
            latest: dict[tuple[int, str], Finding] = {}
            for f in _findings_of(chunk):
                latest.setdefault((f.job_id, f.rule), f)
            changes: list[Change] = []
            new: list[Finding] = []
            for summary in summaries:
                drafts = rules_evaluate(summary, thresholds)
                bill = bills.get(summary.job_id)
                claims = {d.rule: d.wasted_hours for d in drafts}
                wastes = waste_allocate(claims, bill.days if bill else {})
                savings = savings_allocate(claims, bill.days if bill else {}, since)
                fired = {d.rule for d in drafts}
                for draft in drafts:
                    waste = wastes[draft.rule]
                    values = {
                        "severity": draft.severity,
                        "evidence": draft.evidence,
                        "waste": waste.money,
                        "wasted_gpu_hours": round(waste.hours, 4),
                        "savings": savings[draft.rule].money,
                        "savings_from": since,
                        "currency": bill.currency if bill else draft.currency,
                        "advice": draft.advice,
                    }
                    known = latest.get((summary.job_id, draft.rule))
                    if known is None:
                        new.append(Finding(job_id=summary.job_id, rule=draft.rule, **values))
                    elif known.state in LIVE_STATES or not known.resolved_by_rules:
                        Finding.objects.filter(pk=known.pk).update(**values, updated_at=now)
                        result.refreshed += 1
                    else:
                        Finding.objects.filter(pk=known.pk).update(
                            **values, state=Finding.State.OPEN, resolved_at=None, updated_at=now
                        )
                        changes.append(Change(known.pk, "reopened", known.state, Finding.State.OPEN, FIRES_AGAIN))
                        result.reopened += 1
                for (job_id, rule), f in latest.items():
                    if job_id == summary.job_id and rule not in fired and f.state in LIVE_STATES:
                        Finding.objects.filter(pk=f.pk).update(
                            state=Finding.State.RESOLVED, resolved_at=now, updated_at=now, state_changed_by=None,
                            waste=0, wasted_gpu_hours=0, savings=0,
                        )  # fmt: skip
                        changes.append(Change(f.pk, "resolved", f.state, Finding.State.RESOLVED, _no_longer(summary)))
                        result.resolved += 1
            Finding.objects.bulk_create(new)
            result.opened += len(new)
            changes += [Change(f.pk, "opened", "", Finding.State.OPEN) for f in new]
            _record(changes, now)
            JobEvaluation.objects.filter(job_id__in=chunk).update(evaluated_at=now)
            if final:
                JobEvaluation.objects.filter(job_id__in=chunk).update(final_at=now)
        result.jobs += len(summaries)
    return result


def _record(changes: list[Change], now: datetime) -> None:
    """History rows and outbox rows for the changes, in the transaction that made them."""
    if not changes:
        return
    FindingEvent.objects.bulk_create(
        [
            FindingEvent(finding_id=c.finding_id, verb=c.verb, from_state=c.from_state, to_state=c.to_state,
                         by_id=c.by_id, reason=c.reason, at=now)
            for c in changes
        ]
    )  # fmt: skip
    if not notify_destinations(settings.GOVERNANCE_FINDINGS_WEBHOOK_URL):
        return
    findings = Finding.objects.select_related("job__cluster", "job__project__team", "state_changed_by").in_bulk(
        [c.finding_id for c in changes]
    )
    for c in changes:
        notification_enqueue(
            event=f"finding.{c.verb}",
            payload=finding_payload(findings[c.finding_id], reason=c.reason),
            text=finding_text(findings[c.finding_id], c.verb, c.reason),
            destinations=[settings.GOVERNANCE_FINDINGS_WEBHOOK_URL],
        )


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


def findings_savings_refresh(*, now: datetime | None = None) -> Evaluation:
    """Keep savings to the trailing window as it moves (daily; running jobs move with their 15-minute pass): the
    findings of jobs that ended before the window began save nothing any more, and jobs that ran across the window's
    first day are evaluated again so their days before it drop out."""
    now = now or timezone.now()
    since = savings_window_start(now)
    edge = datetime.combine(since, time.min, tzinfo=UTC)
    stale = Finding.objects.filter(savings_from__lt=since)
    stale.filter(job__end_time__lt=edge).update(savings=0, savings_from=since, updated_at=now)
    across = stale.filter(job__start_time__lt=edge, job__end_time__gte=edge).values_list("job_id", flat=True)
    return findings_evaluate(job_ids=set(across), now=now)


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


def _change(*, finding_id: int, user: User, state: str, verb: str, reason: str = "") -> Finding:
    now = timezone.now()
    with transaction.atomic():
        finding = Finding.objects.select_for_update().get(pk=finding_id)
        before = finding.state
        if state == Finding.State.OPEN:
            if before in LIVE_STATES:
                raise FindingStateError(NOT_CLOSED.format(state=before))
            live = Finding.objects.filter(job_id=finding.job_id, rule=finding.rule, state__in=LIVE_STATES)
            if live.exclude(pk=finding.pk).exists():
                raise FindingStateError(ANOTHER_LIVE.format(rule=finding.rule))
        elif before not in LIVE_STATES:
            raise FindingStateError(NOT_LIVE.format(state=before))
        finding.state = state
        finding.state_changed_by = user
        finding.dismissed_reason = reason if state == Finding.State.DISMISSED else ""
        finding.resolved_at = now if state == Finding.State.RESOLVED else None
        finding.save(update_fields=["state", "state_changed_by", "dismissed_reason", "resolved_at", "updated_at"])
        _record([Change(finding.pk, verb, before, state, reason, user.pk)], now)
    return finding


def finding_acknowledge(*, finding_id: int, user: User, reason: str = "") -> Finding:
    return _change(finding_id=finding_id, user=user, state=Finding.State.ACKNOWLEDGED, verb="acknowledged",
                   reason=(reason or "").strip())  # fmt: skip


def finding_dismiss(*, finding_id: int, user: User, reason: str) -> Finding:
    reason = (reason or "").strip()
    if not reason:
        raise FindingStateError(REASON_REQUIRED)
    return _change(finding_id=finding_id, user=user, state=Finding.State.DISMISSED, verb="dismissed", reason=reason)


def finding_resolve(*, finding_id: int, user: User, reason: str = "") -> Finding:
    """A person says it is fixed: the rules' re-evaluation leaves it resolved even while the rule still fires."""
    return _change(finding_id=finding_id, user=user, state=Finding.State.RESOLVED, verb="resolved",
                   reason=(reason or "").strip())  # fmt: skip


def finding_reopen(*, finding_id: int, user: User, reason: str = "") -> Finding:
    return _change(finding_id=finding_id, user=user, state=Finding.State.OPEN, verb="reopened",
                   reason=(reason or "").strip())  # fmt: skip


class _StateChange(Protocol):
    def __call__(self, *, finding_id: int, user: User, reason: str) -> Finding: ...


def finding_state_set(*, finding_id: int, user: User, state: str, reason: str = "") -> Finding:
    """The one entry point of the API and the pages: the state a person asks for."""
    changes: dict[str, _StateChange] = {
        Finding.State.ACKNOWLEDGED: finding_acknowledge,
        Finding.State.DISMISSED: finding_dismiss,
        Finding.State.RESOLVED: finding_resolve,
        Finding.State.OPEN: finding_reopen,
    }
    change = changes[Finding.State(state)]
    return change(finding_id=finding_id, user=user, reason=reason)
