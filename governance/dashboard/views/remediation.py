"""The remediation page for admins and team leads: the policies, what dry runs would have done over the last 30
days (so a team can turn `act` on with evidence), the warnings pending, and the actions taken."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from governance.org.auth import signed_in_user
from governance.org.models import User
from governance.org.selectors import teams_led
from governance.remediation.selectors import (
    DRY_RUN_DAYS,
    cases_visible,
    dry_run_report,
    policies_visible,
    steps_visible,
)


def may_open(user: User) -> bool:
    return user.is_authenticated and (user.sees_all_costs or teams_led(user=user).exists())


@login_required
def remediation_page(request: HttpRequest) -> HttpResponse:
    user = signed_in_user(request)
    if not may_open(user):
        raise Http404("No such page.")
    now = timezone.now()
    since = now - timedelta(days=DRY_RUN_DAYS)
    context = {
        "policies": policies_visible(user=user),
        "dry_run": dry_run_report(user=user, now=now),
        "pending": cases_visible(user=user).exclude(stage="closed").filter(dry_run=False).order_by("deadline")[:200],
        "actions": steps_visible(user=user)
        .filter(decision__in=["act", "failed"], dry_run=False, at__gt=since)
        .order_by("-at")[:200],
        "days": DRY_RUN_DAYS,
    }
    return render(request, "remediation/page.html", context)
