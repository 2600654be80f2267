"""Writes for chargeback: rate cards, declared capacity, budgets, closing a month, budget alerts."""

from __future__ import annotations

import json
import logging
import urllib.request
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from governance.costs.currency import validate_currency
from governance.costs.models import Budget, BudgetAlert, DeclaredCapacity, MonthClose, RateCard, StatementLine
from governance.costs.selectors import open_month_charges, statement_charges
from governance.fleet.models import Cluster
from governance.lib.money import to_cents
from governance.lib.months import Month
from governance.org.models import Membership, Team, User

logger = logging.getLogger(__name__)

MONTH_CLOSED = "{field}: {when} falls in or before the closed month {month}; a closed month never changes."
MONTH_ALREADY_CLOSED = "month {month} is already closed; a closed month never changes."
MONTH_NOT_ENDED = "month {month} has not ended yet; it can be closed from {end:%Y-%m-%d} on."
CURRENCY_MISMATCH = "currency: {currency} differs from the rate cards in force ({existing}); use one currency."
NOT_NEGATIVE = "{field}: must not be negative (got {value})."
NOT_A_NUMBER = "{field}: {value!r} is not a number."
UNKNOWN_CLUSTER = "cluster: no cluster named {name!r}."
DEFAULT_THRESHOLDS = [50, 80, 100]
BATCH = 5000


class MonthClosed(ValidationError):
    """The change would alter a closed month."""


def _decimal(value: object, name: str) -> Decimal:
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        raise ValidationError(NOT_A_NUMBER.format(field=name, value=value), code="invalid") from None
    if not number.is_finite():
        raise ValidationError(NOT_A_NUMBER.format(field=name, value=value), code="invalid")
    if number < 0:
        raise ValidationError(NOT_NEGATIVE.format(field=name, value=value), code="negative")
    return number


def last_closed_month() -> Month | None:
    latest = MonthClose.objects.order_by("-month").values_list("month", flat=True).first()
    return Month(latest.year, latest.month) if latest else None


def month_open_check(*, when: datetime, field: str = "valid_from") -> None:
    """Refuse a change effective at `when` if it would reprice a closed month."""
    closed = last_closed_month()
    if closed is not None and when < closed.end:
        raise MonthClosed(MONTH_CLOSED.format(field=field, when=when.isoformat(), month=closed), code="month_closed")


def rate_card_set(
    *, gpu_model: str, price: Decimal | str, currency: str, valid_from: datetime, cluster: str | None = None,
    energy_price_per_kwh: Decimal | str | None = None,
) -> RateCard:  # fmt: skip
    """Create (or correct, if its start is still open) the rate of a GPU model from `valid_from` on."""
    price = _decimal(price, "price")
    energy = None if energy_price_per_kwh in (None, "") else _decimal(energy_price_per_kwh, "energy_price_per_kwh")
    validate_currency(currency)
    existing = set(
        RateCard.objects.exclude(gpu_model=gpu_model, valid_from=valid_from).values_list("currency", flat=True)
    )
    if existing and existing != {currency}:
        raise ValidationError(CURRENCY_MISMATCH.format(currency=currency, existing=", ".join(sorted(existing))))
    if not gpu_model.strip():
        raise ValidationError("gpu_model: must not be empty (use '*' for the default rate).")
    month_open_check(when=valid_from)
    cluster_obj = _cluster(cluster) if cluster else None
    card, _ = RateCard.objects.update_or_create(
        gpu_model=gpu_model.strip(), cluster=cluster_obj, valid_from=valid_from,
        defaults={"price_per_gpu_hour": price, "currency": currency, "energy_price_per_kwh": energy},
    )  # fmt: skip
    return card


def _cluster(name: str) -> Cluster:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise ValidationError(UNKNOWN_CLUSTER.format(name=name), code="unknown")
    return cluster


def capacity_set(*, cluster: str, gpu_model: str, count: int, valid_from: datetime) -> DeclaredCapacity:
    """Declare how many GPUs of a model a cluster holds from `valid_from` on (a cluster only schedulers report)."""
    if count < 0:
        raise ValidationError(NOT_NEGATIVE.format(field="count", value=count), code="negative")
    if not gpu_model.strip():
        raise ValidationError("gpu_model: must not be empty.")
    month_open_check(when=valid_from)
    cluster_obj, _ = Cluster.objects.get_or_create(name=cluster)
    capacity, _ = DeclaredCapacity.objects.update_or_create(
        cluster=cluster_obj, gpu_model=gpu_model.strip(), valid_from=valid_from, defaults={"count": count}
    )
    return capacity


def budget_set(
    *, team: Team, month: Month, amount: Decimal | str, currency: str = "USD", thresholds: list[int] | None = None,
    webhook_url: str = "",
) -> Budget:  # fmt: skip
    amount = _decimal(amount, "amount")
    validate_currency(currency)
    if thresholds is not None and any(not isinstance(t, int) or not 0 < t <= 1000 for t in thresholds):
        raise ValidationError("thresholds: use whole percentages between 1 and 1000.")
    month_open_check(when=month.start, field="month")
    budget, _ = Budget.objects.update_or_create(
        team=team, month=month.start.date(),
        defaults={"amount": amount, "currency": currency, "thresholds": thresholds or [], "webhook_url": webhook_url},
    )  # fmt: skip
    return budget


FROZEN_FIELDS = {
    "cluster": "cluster_name", "team": "team_name", "project": "project_name", "user": "user_name",
}  # fmt: skip


def statement_close(*, month: Month, user: User | None = None, now: datetime | None = None) -> MonthClose:
    """Freeze a month's statement (with the corrections landing in it); from then on it is read, never computed."""
    now = now or timezone.now()
    if month.end > now:
        raise ValidationError(MONTH_NOT_ENDED.format(month=month, end=month.end), code="not_ended")
    try:
        with transaction.atomic():
            close = MonthClose.objects.create(month=month.start.date(), closed_by=user)
            batch: list[StatementLine] = []
            # Computed after the close row exists, inside the same transaction: a second close waits and fails.
            for charge in open_month_charges(month=month, now=now):
                batch.append(_line(close, charge))
                if len(batch) >= BATCH:
                    StatementLine.objects.bulk_create(batch)
                    batch = []
            StatementLine.objects.bulk_create(batch)
    except IntegrityError:
        raise ValidationError(MONTH_ALREADY_CLOSED.format(month=month), code="month_closed") from None
    return close


def _line(close: MonthClose, c) -> StatementLine:
    return StatementLine(
        close=close, kind=c.kind, period_start=c.period_start, period_end=c.period_end,
        corrects=c.corrects.start.date() if c.corrects else None, cluster_name=c.cluster, team_id=c.team_id,
        team_name=c.team, project_name=c.project, job_ref=c.job_ref, user_name=c.user, gpu_model=c.gpu_model,
        mig_profile=c.mig_profile, gpu_hours=c.gpu_hours, used_gpu_hours=c.used_gpu_hours,
        idle_gpu_hours=c.idle_gpu_hours, cost=c.cost, idle_cost=c.idle_cost, energy_kwh=c.energy_kwh,
        energy_cost=c.energy_cost, currency=c.currency, at_default_rate=c.at_default_rate,
    )  # fmt: skip


@dataclass(frozen=True)
class AlertSent:
    team: str
    threshold: int
    spent: Decimal
    budget: Decimal
    currency: str


def budget_alerts_check(*, month: Month | None = None, now: datetime | None = None) -> list[AlertSent]:
    """Record each newly crossed threshold once, then tell the team lead by email and webhook (after commit)."""
    now = now or timezone.now()
    month = month or Month.of(now)
    sent = []
    budgets = list(Budget.objects.filter(month=month.start.date()).select_related("team"))
    if not budgets:
        return sent
    spent_by_team: dict[int | None, Decimal] = defaultdict(Decimal)
    for charge in statement_charges(month=month, now=now, team_ids=[b.team_id for b in budgets]):
        spent_by_team[charge.team_id] += charge.cost
    for budget in budgets:
        spent = to_cents(spent_by_team[budget.team_id])
        for threshold in sorted(budget.thresholds or DEFAULT_THRESHOLDS):
            if spent * 100 < budget.amount * threshold:
                continue
            try:
                with transaction.atomic():
                    alert = BudgetAlert.objects.create(budget=budget, threshold=threshold, spent=spent)
            except IntegrityError:
                continue  # announced before: once per threshold and month
            note = AlertSent(budget.team.name, threshold, spent, budget.amount, budget.currency)
            transaction.on_commit(lambda b=budget, n=note, a=alert.pk: _announce(b, n, a))
            sent.append(note)
    return sent


def _lead_emails(team: Team) -> list[str]:
    emails = list(
        Membership.objects.filter(team=team, role=Membership.Role.LEAD)
        .exclude(user__email="")
        .values_list("user__email", flat=True)
    )
    return emails or ([team.lead_email] if team.lead_email else [])


def _announce(budget: Budget, note: AlertSent, alert_pk: int) -> None:
    subject = f"[gpu-governance] {note.team} reached {note.threshold}% of its {budget.month:%Y-%m} GPU budget"
    body = f"{note.team} has spent {note.spent} {note.currency} of {note.budget} {note.currency} ({note.threshold}%)."
    recipients = _lead_emails(budget.team)
    if recipients:
        send_mail(subject, body, None, recipients, fail_silently=True)
    url = budget.webhook_url or settings.GOVERNANCE_BUDGET_WEBHOOK_URL
    if url:
        payload = {
            "team": note.team,
            "month": f"{budget.month:%Y-%m}",
            "threshold": note.threshold,
            "spent": str(note.spent),
            "budget": str(note.budget),
            "currency": note.currency,
            "alert": alert_pk,
        }
        webhook_post(url=url, payload=payload)


def webhook_post(*, url: str, payload: dict, timeout: float = 5.0) -> bool:
    if not url.startswith(("http://", "https://")):
        logger.warning("budget webhook %r is not an http(s) URL; not called", url)
        return False
    request = urllib.request.Request(  # noqa: S310 (scheme checked above)
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return 200 <= response.status < 300
    except OSError:
        logger.warning("budget webhook %s failed", url, exc_info=True)
        return False
