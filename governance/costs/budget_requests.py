"""A team asks for a budget: one request per team and month, announced to finance and admins (email after commit,
and the notification outbox)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Q

from governance.costs.models import Budget, BudgetRequest
from governance.lib.months import Month
from governance.notify.services import notification_enqueue
from governance.org.models import Team, User

ALREADY_SET = "month: {team} already has a budget for {month}."
ALREADY_ASKED = "month: {who} already asked for {team}'s {month} budget on {day}."
EVENT = "budget.requested"


def finance_emails() -> list[str]:
    """Who sets budgets: finance and platform admins with an email."""
    people = User.objects.filter(Q(role__in=[User.Role.FINANCE, User.Role.ADMIN]) | Q(is_superuser=True))
    return sorted(set(people.filter(is_active=True).exclude(email="").values_list("email", flat=True)))


def budget_request_send(*, team: Team, month: Month, user: User, page_url: str = "") -> BudgetRequest:
    """Record the request (refused, writing nothing, if the month has a budget or was asked for already) and tell
    finance and admins."""
    first = month.start.date()
    if Budget.objects.filter(team=team, month=first).exists():
        raise ValidationError(ALREADY_SET.format(team=team.name, month=month))
    try:
        with transaction.atomic():
            request = BudgetRequest.objects.create(team=team, month=first, requested_by=user,
                                                   requested_by_name=user.get_username())  # fmt: skip
            subject = f"[gpu-governance] {team.name} asks for a GPU budget for {month}"
            body = f"{user.get_username()} asks finance to set {team.name}'s GPU budget for {month}."
            if page_url:
                body += f" The team's month: {page_url}"
            notification_enqueue(event=EVENT, text=f"{subject}: {body}",
                                 payload={"team": team.slug, "month": str(month), "requested_by": user.get_username(),
                                          "request": request.pk})  # fmt: skip
            recipients = finance_emails()
            if recipients:
                transaction.on_commit(lambda: send_mail(subject, body, None, recipients, fail_silently=True))
    except IntegrityError:
        earlier = BudgetRequest.objects.get(team=team, month=first)
        raise ValidationError(ALREADY_ASKED.format(who=earlier.requested_by_name, team=team.name, month=month,
                                                   day=f"{earlier.requested_at:%Y-%m-%d}")) from None  # fmt: skip
    return request
