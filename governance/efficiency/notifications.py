"""Telling people: each finding's state change (through the outbox), a weekly digest per engineer and lead, a
cluster alert. Deliveries are governance/notify's: stored with the change, sent and retried by the worker.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.core.mail import send_mail
from django.db.models import Q
from django.utils import timezone

from governance.efficiency.models import LIVE_STATES, ClusterAlert, Finding
from governance.efficiency.selectors import cluster_utilisation
from governance.fleet.models import Cluster
from governance.lib.money import format_money
from governance.notify.services import notification_enqueue
from governance.org.models import Membership, User

logger = logging.getLogger(__name__)

ALERT_EVERY = timedelta(days=1)


def finding_payload(finding: Finding, *, reason: str = "") -> dict:
    """The JSON body of a finding's event (the outbox adds the event name)."""
    job = finding.job
    return {
        "finding_id": finding.pk,
        "job_id": job.external_id,
        "cluster": job.cluster.name,
        "user": job.user_name,
        "team": job.project.team.slug if job.project else None,
        "rule": finding.rule,
        "severity": finding.severity,
        "state": finding.state,
        "reason": reason,
        "changed_by": finding.state_changed_by.username if finding.state_changed_by else None,
        "waste": str(finding.waste),
        "savings_last_30_days": str(finding.savings),
        "savings_from": finding.savings_from.isoformat() if finding.savings_from else None,
        "currency": finding.currency,
        "advice": finding.advice,
        "evidence": finding.evidence,
    }


def finding_text(finding: Finding, verb: str, reason: str = "") -> str:
    """What a chat channel or an inbox shows."""
    why = f" ({reason})" if reason else ""
    return (
        f"Finding {verb}{why}: {finding.rule} on job {finding.job.external_id} ({finding.job.cluster.name}, "
        f"{finding.job.user_name}), {format_money(finding.waste, finding.currency)} wasted. {finding.advice}"
    )


def _digest_lines(findings: list[Finding]) -> str:
    return "\n".join(
        f"- {format_money(f.savings, f.currency)} to save ({format_money(f.waste, f.currency)} wasted)  {f.rule} on "
        f"job {f.job.external_id} "
        f"({f.job.cluster.name}): {f.advice}"
        for f in findings
    )


def digests_send(*, now: datetime | None = None) -> int:
    """One email per engineer (findings on their jobs) and per lead (findings of their teams), most money first."""
    live = list(
        Finding.objects.filter(state__in=LIVE_STATES)
        .select_related("job__cluster", "job__project__team")
        .order_by("-savings", "-waste", "-id")
    )
    by_user: dict[str, list[Finding]] = defaultdict(list)
    by_team: dict[int, list[Finding]] = defaultdict(list)
    for f in live:
        by_user[f.job.user_name].append(f)
        if f.job.project is not None:
            by_team[f.job.project.team_id].append(f)
    sent = 0
    engineers = User.objects.filter(is_active=True, username__in=list(by_user)).exclude(email="")
    for user in engineers:
        mine = [f for f in by_user[user.username] if f.job.project and _member(user, f.job.project.team_id)]
        sent += _send(user.email, f"{len(mine)} efficiency findings on your GPU jobs", mine)
    leads = Membership.objects.filter(role=Membership.Role.LEAD, team_id__in=list(by_team), user__is_active=True)
    for m in leads.select_related("user", "team").exclude(user__email=""):
        team = by_team[m.team_id]
        sent += _send(m.user.email, f"{len(team)} efficiency findings in team {m.team.name}", team)
    return sent


def _member(user: User, team_id: int) -> bool:
    return user.memberships.filter(team_id=team_id).exists()


def _send(to: str, subject: str, findings: list[Finding]) -> int:
    if not findings:
        return 0
    total = sum((f.waste for f in findings), Decimal(0))
    savings = sum((f.savings for f in findings), Decimal(0))
    body = (
        f"Waste billed so far: {format_money(total, findings[0].currency)}; following the advice would have saved "
        f"{format_money(savings, findings[0].currency)} over the last 30 days (each GPU-hour counted once), the "
        "biggest saving first.\n\n"
        f"{_digest_lines(findings)}\n"
    )
    return send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [to], fail_silently=False)


def cluster_alerts_check(*, now: datetime | None = None) -> list[ClusterAlert]:
    """Alert (email and webhook) for each cluster whose effective utilisation over the last day is under the line.

    A cluster is alerted at most once a day.
    """
    now = now or timezone.now()
    threshold = settings.GOVERNANCE_CLUSTER_ALERT_UTIL_PERCENT
    alerts = []
    for cluster in Cluster.objects.all():
        util = cluster_utilisation(cluster_id=cluster.pk, start=now - timedelta(days=1), end=now)
        if util is None or util >= threshold:
            continue
        if ClusterAlert.objects.filter(cluster=cluster, window_end__gt=now - ALERT_EVERY).exists():
            continue
        alert = ClusterAlert.objects.create(
            cluster=cluster, window_end=now, utilisation_percent=util, threshold_percent=threshold
        )
        alerts.append(alert)
        text = (
            f"Cluster {cluster.name}: effective utilisation over the last day was {util:.1f}%, under the "
            f"{threshold:g}% alert line. Scale the cluster down or move work onto it."
        )
        to = list(settings.GOVERNANCE_CLUSTER_ALERT_EMAILS) or list(
            User.objects.filter(Q(role=User.Role.ADMIN) | Q(is_superuser=True), is_active=True)
            .exclude(email="")
            .values_list("email", flat=True)
        )
        if to:
            send_mail(f"GPU cluster {cluster.name} at {util:.0f}% utilisation", text, settings.DEFAULT_FROM_EMAIL, to)
        url = settings.GOVERNANCE_CLUSTER_ALERT_WEBHOOK_URL or settings.GOVERNANCE_FINDINGS_WEBHOOK_URL
        payload = {
            "cluster": cluster.name,
            "text": text,
            "utilisation_percent": round(util, 2),
            "threshold_percent": threshold,
            "window_end": now.isoformat(),
        }
        notification_enqueue(event="cluster.low_utilisation", payload=payload, text=text, destinations=[url])
    return alerts
