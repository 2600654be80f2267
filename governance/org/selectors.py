"""Who may see what. Every page, API list, filter, CSV and chart asks these, so the rule lives once.

- admin and finance: every team.
- team lead: the teams they lead (statements, jobs, findings, budgets).
- engineer: their own jobs in detail, and their teams' totals.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, router
from django.db.models import Q, QuerySet

from governance.org.models import Membership, Team, User


def _teams_of(user: User, **membership: object) -> QuerySet[Team]:
    """The teams `user` has a membership of (with `membership`'s conditions). Usually joined into the statement that
    uses them; while the request reads a streaming replica (governance/lib/replica.py), the memberships are read on
    the primary first, so that a user taken off a team sees none of it at once, not once the replica catches up."""
    if router.db_for_read(Team) == DEFAULT_DB_ALIAS:
        conditions = {f"memberships__{field}": value for field, value in membership.items()}
        return Team.objects.filter(memberships__user=user, **conditions).distinct()
    ids = Membership.objects.using(DEFAULT_DB_ALIAS).filter(user=user, **membership).values_list("team_id", flat=True)
    return Team.objects.filter(pk__in=list(ids))


def teams_visible(*, user: User) -> QuerySet[Team]:
    """Teams whose totals the user may see."""
    if not user.is_authenticated or not user.is_active:
        return Team.objects.none()
    if user.sees_all_costs:
        return Team.objects.all()
    return _teams_of(user)


def teams_led(*, user: User) -> QuerySet[Team]:
    """Teams whose detail (every job, statement lines, findings, budgets) the user may see."""
    if not user.is_authenticated or not user.is_active:
        return Team.objects.none()
    if user.sees_all_costs:
        return Team.objects.all()
    return _teams_of(user, role=Membership.Role.LEAD)


def job_visibility_filter(*, user: User, prefix: str = "") -> Q:
    """A Q on Job (or on a model reaching Job through `prefix`, e.g. "job__") that keeps the visible jobs.

    Admins and finance see every job; leads see their teams' jobs; engineers see the jobs they ran
    (matched by scheduler user name = username). Unattributed jobs are visible to admins and finance only.
    """
    if not user.is_authenticated or not user.is_active:
        return Q(pk__in=[])
    if user.sees_all_costs:
        return Q()
    led = teams_led(user=user).values("pk")
    mine = Q(**{f"{prefix}user_name": user.username}, **{f"{prefix}project__team__in": teams_visible(user=user)})
    return Q(**{f"{prefix}project__team__in": led}) | mine


def can_see_team(*, user: User, team: Team) -> bool:
    return teams_visible(user=user).filter(pk=team.pk).exists()


def can_see_team_detail(*, user: User, team: Team) -> bool:
    return teams_led(user=user).filter(pk=team.pk).exists()


def team_totals_filter(*, user: User, prefix: str = "") -> Q:
    """A Q on Job (or through `prefix`) keeping jobs whose team totals the user may see (chargeback, charts).

    Admins and finance: every job, unattributed ones included. Anyone else: jobs of their teams.
    """
    if not user.is_authenticated or not user.is_active:
        return Q(pk__in=[])
    if user.sees_all_costs:
        return Q()
    return Q(**{f"{prefix}project__team__in": teams_visible(user=user).values("pk")})


def team_lead_emails(*, team: Team) -> list[str]:
    """Where a team's lead is told about its bill: the leads' emails, else the team's lead_email."""
    emails = list(
        Membership.objects.filter(team=team, role=Membership.Role.LEAD)
        .exclude(user__email="")
        .values_list("user__email", flat=True)
    )
    return emails or ([team.lead_email] if team.lead_email else [])
