"""Telling people: a webhook per new finding, a weekly digest per engineer and lead, a cluster alert.

Slow I/O runs after the findings are committed; a failed POST is logged and never undoes a finding.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
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
from governance.org.models import Membership, User

logger = logging.getLogger(__name__)

ALERT_EVERY = timedelta(days=1)


def webhook_post(*, url: str, payload: dict) -> bool:
    """POST JSON; True on a 2xx answer. Failures are logged, never raised."""
    if not url.startswith(("https://", "http://")):
        logger.warning("webhook URL %r is not http(s); nothing sent", url)
        return False
    body = json.dumps(payload, default=str).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=settings.GOVERNANCE_FINDINGS_WEBHOOK_TIMEOUT_S) as response:  # noqa: S310
            return 200 <= response.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        logger.warning("webhook POST to %s failed", url, exc_info=True)
        return False


def finding_payload(finding: Finding) -> dict:
    job = finding.job
    return {
        "event": "finding.opened",
        "finding_id": finding.pk,
        "job_id": job.external_id,
        "cluster": job.cluster.name,
        "user": job.user_name,
        "team": job.project.team.slug if job.project else None,
        "rule": finding.rule,
        "severity": finding.severity,
        "waste": str(finding.waste),
        "savings_per_month": str(finding.savings),
        "currency": finding.currency,
        "advice": finding.advice,
        "evidence": finding.evidence,
    }


def finding_announce(*, finding_id: int) -> bool:
    """Send the new-finding webhook once; True when it was delivered now."""
    url = settings.GOVERNANCE_FINDINGS_WEBHOOK_URL
    finding = Finding.objects.select_related("job__cluster", "job__project__team").filter(pk=finding_id).first()
    if not url or finding is None or finding.notified_at is not None:
        return False
    if not webhook_post(url=url, payload=finding_payload(finding)):
        return False
    Finding.objects.filter(pk=finding_id).update(notified_at=timezone.now())
    return True


def _digest_lines(findings: list[Finding]) -> str:
    return "\n".join(
        f"- {format_money(f.waste, f.currency)} wasted  {f.rule} on job {f.job.external_id} "
        f"({f.job.cluster.name}): {f.advice}"
        for f in findings
    )


def digests_send(*, now: datetime | None = None) -> int:
    """One email per engineer (findings on their jobs) and per lead (findings of their teams), most money first."""
    live = list(
        Finding.objects.filter(state__in=LIVE_STATES)
        .select_related("job__cluster", "job__project__team")
        .order_by("-waste", "-id")
    )
    by_user: dict[str, list[Finding]] = defaultdict(list)
    by_team: dict[int, list[Finding]] = defaultdict(list)
    for f in live:
        by_user[f.job.user_name].append(f)
        if f.job.project_id:
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
    body = (
        f"Waste billed so far: {format_money(total, findings[0].currency)} (each wasted GPU-hour counted once), "
        "most first.\n\n"
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
        if url:
            payload = {
                "event": "cluster.low_utilisation",
                "cluster": cluster.name,
                "text": text,
                "utilisation_percent": round(util, 2),
                "threshold_percent": threshold,
                "window_end": now,
            }
            webhook_post(url=url, payload=payload)  # fmt: skip
    return alerts
