"""Single sign-on: who an OpenID Connect user is here, from the identity provider's claims.

The role comes from the groups claim (OIDC_ADMIN_GROUPS, OIDC_FINANCE_GROUPS); team memberships from groups
named `gg-team:<team slug>:lead` or `...:engineer`. Teams are never created from claims: an unknown slug is
ignored. At every sign-in the user's memberships are made to match the claims (the provider is the source of
truth for people who sign in through it).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from governance.org.models import Membership, Team, User


@dataclass(frozen=True)
class ClaimedAccess:
    role: str
    teams: dict[str, str]  # team slug -> membership role


def claims_access(claims: dict) -> ClaimedAccess:
    """The role and team memberships the claims grant (pure: no database)."""
    groups = claims.get(settings.OIDC_GROUPS_CLAIM) or []
    if isinstance(groups, str):
        groups = [groups]
    groups = {g for g in groups if isinstance(g, str)}
    if groups & set(settings.OIDC_ADMIN_GROUPS):
        role = User.Role.ADMIN
    elif groups & set(settings.OIDC_FINANCE_GROUPS):
        role = User.Role.FINANCE
    else:
        role = User.Role.MEMBER
    prefix = settings.OIDC_TEAM_GROUP_PREFIX
    teams: dict[str, str] = {}
    for group in sorted(groups):
        if not group.startswith(prefix):
            continue
        slug, _, member_role = group[len(prefix) :].rpartition(":")
        if slug and member_role in Membership.Role.values:
            # A lead claim wins over an engineer claim for the same team.
            if teams.get(slug) != Membership.Role.LEAD:
                teams[slug] = member_role
    return ClaimedAccess(role=role, teams=teams)


@transaction.atomic
def user_access_sync(*, user: User, access: ClaimedAccess) -> User:
    """Give the user the claimed role and exactly the claimed memberships of teams that exist."""
    if not user.is_superuser:
        user.role = access.role
        user.is_staff = access.role == User.Role.ADMIN
        user.save(update_fields=["role", "is_staff"])
    existing = {t.slug: t for t in Team.objects.filter(slug__in=access.teams)}
    Membership.objects.filter(user=user).exclude(team__slug__in=existing).delete()
    for slug, team in existing.items():
        Membership.objects.update_or_create(user=user, team=team, defaults={"role": access.teams[slug]})
    return user


class GovernanceOIDCBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend; users are matched by the username claim, and their access synced."""

    def verify_claims(self, claims: dict) -> bool:
        return bool(claims.get(settings.OIDC_USERNAME_CLAIM))

    def filter_users_by_claims(self, claims: dict):
        username = claims.get(settings.OIDC_USERNAME_CLAIM)
        if not username:
            return self.UserModel.objects.none()
        return self.UserModel.objects.filter(username=username)

    def create_user(self, claims: dict) -> User:
        user = self.UserModel.objects.create_user(claims[settings.OIDC_USERNAME_CLAIM], email=claims.get("email", ""))
        user.set_unusable_password()  # signs in through the provider only
        user.save(update_fields=["password"])
        return self.update_user(user, claims)

    def update_user(self, user: User, claims: dict) -> User:
        if claims.get("email") and user.email != claims["email"]:
            user.email = claims["email"]
            user.save(update_fields=["email"])
        return user_access_sync(user=user, access=claims_access(claims))
