"""Budget alerts: each threshold a team's spend (or its month-end forecast) crosses, announced once by email to
the team lead and through the notification outbox."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import partial

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from governance.costs.forecasts import spend_forecast
from governance.costs.models import Budget, BudgetAlert
from governance.costs.selectors import chargeback_by_team
from governance.lib import format as fmt
from governance.lib.money import to_cents
from governance.lib.months import Month
from governance.notify.services import notification_enqueue
from governance.org.selectors import team_lead_emails

DEFAULT_THRESHOLDS = [50, 80, 100]


@dataclass(frozen=True)
class AlertSent:
    team: str
    threshold: int
    spent: Decimal
    budget: Decimal
    currency: str
    kind: str = BudgetAlert.Kind.ACTUAL
    expected_on: date | None = None


def budget_alerts_check(*, month: Month | None = None, now: datetime | None = None) -> list[AlertSent]:
    """Record each newly crossed threshold once, then tell the team lead by email (after commit) and the webhooks
    (an outbox row per destination, delivered and retried by the worker)."""
    now = now or timezone.now()
    month = month or Month.of(now)
    sent: list[AlertSent] = []
    budgets = list(Budget.objects.filter(month=month.start.date()).select_related("team"))
    if not budgets:
        return sent
    spent_by_team: dict[int | None, Decimal] = defaultdict(Decimal)
    for charge in chargeback_by_team(month=month, team_ids=[b.team_id for b in budgets]):
        spent_by_team[charge.team_id] += charge.cost
    for budget in budgets:
        spent = to_cents(spent_by_team[budget.team_id])
        for threshold in sorted(budget.thresholds or DEFAULT_THRESHOLDS):
            if spent * 100 < budget.amount * threshold:
                continue
            note = AlertSent(budget.team.name, threshold, spent, budget.amount, budget.currency)
            try:
                with transaction.atomic():
                    alert = BudgetAlert.objects.create(budget=budget, threshold=threshold, spent=spent)
                    _announce(budget, note, alert.pk)  # the outbox rows commit with the alert
            except IntegrityError:
                continue  # announced before: once per threshold and month
            sent.append(note)
    sent.extend(_forecast_alerts(budgets, spent_by_team, month, now))
    return sent


def _forecast_alerts(budgets: list[Budget], spent: dict, month: Month, now: datetime) -> list[AlertSent]:
    """Once per budget and month: the month-end forecast exceeds the budget that the spend has not reached yet."""
    pending = [b for b in budgets if to_cents(spent[b.team_id]) < b.amount]
    if not pending or month.end <= now:
        return []
    as_of = (now - timedelta(days=1)).date()  # the last whole day
    forecasts = {f.key: f for f in spend_forecast(month=month, as_of=as_of, keys=[b.team_id for b in pending])}
    sent = []
    for budget in pending:
        f = forecasts.get(budget.team_id)
        if f is None or f.forecast <= budget.amount:
            continue
        try:
            with transaction.atomic():
                alert = BudgetAlert.objects.create(budget=budget, kind=BudgetAlert.Kind.FORECAST, threshold=100,
                                                   spent=f.forecast, expected_on=f.crosses(budget.amount))  # fmt: skip
        except IntegrityError:
            continue
        note = AlertSent(budget.team.name, 100, f.forecast, budget.amount, budget.currency,
                         BudgetAlert.Kind.FORECAST, alert.expected_on)  # fmt: skip
        transaction.on_commit(partial(_announce, budget, note, alert.pk))
        sent.append(note)
    return sent


def forecast_alert_text(note: AlertSent) -> str:
    """'nlp will exceed 50,000 USD by about the 24th (forecast 61,000 USD)'."""
    when = f" by about the {_ordinal(note.expected_on.day)}" if note.expected_on else ""
    return (f"{note.team} will exceed {fmt.money(note.budget, note.currency)}{when}"
            f" (month-end forecast {fmt.money(note.spent, note.currency)}).")  # fmt: skip


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _announce(budget: Budget, note: AlertSent, alert_pk: int) -> None:
    subject = f"[gpu-governance] {note.team} reached {note.threshold}% of its {budget.month:%Y-%m} GPU budget"
    body = f"{note.team} has spent {note.spent} {note.currency} of {note.budget} {note.currency} ({note.threshold}%)."
    if note.kind == BudgetAlert.Kind.FORECAST:
        subject = f"[gpu-governance] {note.team} is forecast to exceed its {budget.month:%Y-%m} GPU budget"
        body = forecast_alert_text(note)
    recipients = team_lead_emails(team=budget.team)
    if recipients:
        transaction.on_commit(lambda: send_mail(subject, body, None, recipients, fail_silently=True))
    payload = {
        "team": note.team,
        "month": f"{budget.month:%Y-%m}",
        "threshold": note.threshold,
        "spent": str(note.spent),
        "budget": str(note.budget),
        "currency": note.currency,
        "alert": alert_pk,
    }
    url = budget.webhook_url or settings.GOVERNANCE_BUDGET_WEBHOOK_URL
    event = "budget.threshold"
    if note.kind == BudgetAlert.Kind.FORECAST:
        event = "budget.forecast"
        payload |= {"kind": note.kind, "forecast": str(note.spent),
                    "expected_on": note.expected_on.isoformat() if note.expected_on else None}  # fmt: skip
    notification_enqueue(event=event, payload=payload, text=f"{subject}: {body}", destinations=[url])
