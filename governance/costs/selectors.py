"""Reads for chargeback: allocation comes from jobs, prices from rate cards, never from raw samples."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from governance.costs.models import RateCard
from governance.costs.pricing import Rate, price_interval
from governance.lib.months import Month
from governance.usage.models import Job

UNATTRIBUTED = "(unattributed)"


@dataclass(frozen=True)
class TeamCharge:
    month: Month
    team: str
    gpu_hours: Decimal
    cost: Decimal
    currency: str


def rates_by_model() -> dict[str, list[Rate]]:
    rates: dict[str, list[Rate]] = defaultdict(list)
    for card in RateCard.objects.filter(cluster__isnull=True).order_by("gpu_model", "valid_from"):
        rates[card.gpu_model].append(Rate(card.valid_from, card.price_per_gpu_hour, card.currency))
    return rates


def jobs_in(start: datetime, end: datetime):
    return (
        Job.objects.filter(start_time__lt=end, gpus__gt=0)
        .filter(Q(end_time__isnull=True) | Q(end_time__gt=start))
        .select_related("project__team")
    )


def chargeback_by_team(*, month: Month, now: datetime | None = None, where: Q | None = None) -> list[TeamCharge]:
    """Allocated GPU-hours x the rate in force, per team, for one month (running jobs up to now).

    `where` narrows the jobs (org.selectors.team_totals_filter for what a user may see).
    """
    now = now or timezone.now()
    rates = rates_by_model()
    totals: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    currency = settings.GOVERNANCE_DEFAULT_CURRENCY
    for job in (
        jobs_in(month.start, month.end)
        .filter(where or Q())
        .only("start_time", "end_time", "gpus", "gpu_model", "project__team__name")
    ):
        start = max(job.start_time, month.start)
        end = min(job.end_time or now, month.end)
        model_rates = rates.get(job.gpu_model, [])
        priced = price_interval(start, end, job.gpus, model_rates)
        if model_rates:
            currency = model_rates[0].currency
        team = job.project.team.name if job.project else UNATTRIBUTED
        totals[team][0] += priced.gpu_hours
        totals[team][1] += priced.cost
    return [
        TeamCharge(month=month, team=team, gpu_hours=hours, cost=cost, currency=currency)
        for team, (hours, cost) in sorted(totals.items())
    ]


def chargeback_months(*, months: list[Month], now: datetime | None = None, where: Q | None = None) -> list[TeamCharge]:
    return [charge for month in months for charge in chargeback_by_team(month=month, now=now, where=where)]
