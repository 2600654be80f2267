"""Reads of remediation: reclaimed GPU-hours and money per team or cluster and month, what dry-run would have done
over the last 30 days, pending warnings, actions taken; each as the user may see it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone

from governance.lib.months import Month
from governance.org.models import User
from governance.org.selectors import job_visibility_filter, teams_led
from governance.remediation.models import Remediation, RemediationPolicy, RemediationStep

D = RemediationStep.Decision
DRY_RUN_DAYS = 30


@dataclass(frozen=True)
class Reclaimed:
    gpu_hours: Decimal
    cost: Decimal
    actions: int
    currency: str


def _reclaimed(steps: QuerySet[RemediationStep]) -> Reclaimed:
    row = steps.aggregate(hours=Sum("gpu_hours"), cost=Sum("cost"), n=Count("id"))
    currency = steps.values_list("currency", flat=True).first() or "USD"
    return Reclaimed(row["hours"] or Decimal(0), row["cost"] or Decimal(0), row["n"], currency)


def _acts(month: Month) -> QuerySet[RemediationStep]:
    return RemediationStep.objects.filter(decision=D.ACT, dry_run=False, at__gte=month.start, at__lt=month.end)


def reclaimed_team_month(*, team_id: int, month: Month) -> Reclaimed:
    """What actions on the team's jobs gave back in the month (counted in the month of the action)."""
    return _reclaimed(_acts(month).filter(case__job__project__team_id=team_id))


def reclaimed_cluster_month(*, cluster_id: int, month: Month) -> Reclaimed:
    return _reclaimed(_acts(month).filter(case__job__cluster_id=cluster_id))


def policies_visible(*, user: User) -> QuerySet[RemediationPolicy]:
    """Admins see every policy; a lead the policies that cover the teams they lead (or every team)."""
    base = RemediationPolicy.objects.select_related("cluster", "created_by").prefetch_related("teams")
    if not user.is_authenticated or not user.is_active:
        return base.none()
    if user.sees_all_costs:
        return base
    led = teams_led(user=user)
    return base.filter(Q(teams__in=led) | Q(teams__isnull=True)).distinct() if led.exists() else base.none()


def steps_visible(*, user: User) -> QuerySet[RemediationStep]:
    """Steps on the jobs the user may see (admins and finance: all; leads: their teams'; engineers: their own)."""
    steps = RemediationStep.objects.select_related("case__policy", "case__job__cluster", "case__job__project__team")
    return steps.filter(job_visibility_filter(user=user, prefix="case__job__"))


def cases_visible(*, user: User) -> QuerySet[Remediation]:
    cases = Remediation.objects.select_related("policy", "job__cluster", "job__project__team")
    return cases.filter(job_visibility_filter(user=user, prefix="job__"))


@dataclass(frozen=True)
class DryRunLine:
    policy: str
    warnings: int
    actions: int
    gpu_hours: Decimal
    cost: Decimal
    currency: str


def dry_run_report(*, user: User, now: datetime | None = None) -> list[DryRunLine]:
    """Per policy, what its dry runs would have done in the last 30 days: warnings, actions, GPU-hours and money."""
    now = now or timezone.now()
    steps = steps_visible(user=user).filter(dry_run=True, at__gt=now - timedelta(days=DRY_RUN_DAYS), at__lte=now)
    rows = (
        steps.values("case__policy__name")
        .annotate(
            warnings=Count("id", filter=Q(decision__in=[D.WARN, D.WARN_AGAIN])),
            actions=Count("id", filter=Q(decision=D.ACT)),
            hours=Sum("gpu_hours", filter=Q(decision=D.ACT)),
            cost=Sum("cost", filter=Q(decision=D.ACT)),
        )
        .order_by("case__policy__name")
    )
    currency = steps.filter(decision=D.ACT).values_list("currency", flat=True).first() or "USD"
    return [
        DryRunLine(r["case__policy__name"], r["warnings"], r["actions"], r["hours"] or Decimal(0),
                   r["cost"] or Decimal(0), currency)
        for r in rows
    ]  # fmt: skip
