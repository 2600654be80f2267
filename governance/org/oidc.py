"""Single sign-on: who an OpenID Connect user is here, from the identity provider's claims.

A user is bound to the provider's issuer and subject (`OidcIdentity`) at the first sign-in, as a new local user:
a provider account is never matched to a local one by its name (a provider's `admin` becomes `admin-2`), unless
an admin links them. Superusers, and platform admins by local role, sign in with their password unless
OIDC_ALLOW_SUPERUSER says otherwise.

The role comes from the groups claim (OIDC_ADMIN_GROUPS, OIDC_FINANCE_GROUPS); team memberships from groups
named `gg-team:<team slug>:lead` or `...:engineer`. Teams are never created from claims: an unknown slug is
ignored. At every sign-in the user's memberships are made to match the claims (the provider is the source of
truth for people who sign in through it).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from governance.org.models import Membership, OidcIdentity, Team, User

logger = logging.getLogger(__name__)


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


def _free_username(wanted: str) -> str:
    """`wanted` (in the characters a username may hold), or with -2, -3... where a local account has it, so that
    a provider's `admin` becomes `admin-2`, never the local `admin` (compared ignoring case)."""
    base = re.sub(r"[^\w.@+-]", "-", wanted)[:140] or "sso-user"
    name, n = base, 1
    while User.objects.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def _refused(identity: OidcIdentity, access: ClaimedAccess) -> str | None:
    """Why this local account may not sign in through the provider (None: it may)."""
    user = identity.user
    if not user.is_active:
        return "the account is inactive"
    if settings.OIDC_ALLOW_SUPERUSER:
        return None
    if user.is_superuser:
        return "superusers sign in with their password (OIDC_ALLOW_SUPERUSER is off)"
    # A linked local account's admin role is local; one the provider's groups gave is theirs to take back.
    if identity.linked and user.role == User.Role.ADMIN and access.role != User.Role.ADMIN:
        return "a platform admin by local role signs in with their password (OIDC_ALLOW_SUPERUSER is off)"
    return None


@transaction.atomic
def oidc_user_sign_in(*, issuer: str, subject: str, claims: dict) -> User | None:
    """The local user of the provider's (issuer, subject), their access synced from the claims; None where the
    sign-in is refused. The first sign-in makes a new local user, under a username no local account has: an
    existing account is only ever reached through an identity an admin linked (`oidc_identity_link`)."""
    access = claims_access(claims)
    identity = OidcIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
    if identity is None:
        wanted = claims.get(settings.OIDC_USERNAME_CLAIM)
        made = User.objects.create_user(_free_username(wanted if isinstance(wanted, str) else subject))
        made.set_unusable_password()  # signs in through the provider only
        made.save(update_fields=["password"])
        identity = OidcIdentity.objects.create(issuer=issuer, subject=subject, user=made)
    user = identity.user
    why = _refused(identity, access)
    if why:
        logger.warning("OIDC sign-in of %s at %s as %s refused: %s", subject, issuer, user.username, why)
        return None
    email = claims.get("email")
    if isinstance(email, str) and email and user.email != email:
        user.email = email
        user.save(update_fields=["email"])
    return user_access_sync(user=user, access=access)


def oidc_identity_link(*, user: User, issuer: str, subject: str, by: User | None = None) -> OidcIdentity:
    """An admin's decision: the provider's (issuer, subject) signs in as this existing local account."""
    if not issuer or not subject:
        raise ValidationError({"issuer" if not issuer else "subject": "This field is required."})
    taken = OidcIdentity.objects.filter(issuer=issuer, subject=subject).exclude(user=user).first()
    if taken is not None:
        raise ValidationError({"subject": f"{subject} at {issuer} already signs in as {taken.user.username}."})
    defaults = {"user": user, "linked": True, "linked_by": by}
    identity, _ = OidcIdentity.objects.get_or_create(issuer=issuer, subject=subject, defaults=defaults)
    return identity


class GovernanceOIDCBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend: a user is the ID token's issuer and subject (see `oidc_user_sign_in`)."""

    def verify_claims(self, claims: dict) -> bool:
        return bool(claims.get("sub"))

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict) -> User | None:
        issuer, subject, audience = payload.get("iss"), payload.get("sub"), payload.get("aud")
        if not isinstance(issuer, str) or not isinstance(subject, str) or not issuer or not subject:
            raise SuspiciousOperation("The ID token names no issuer or no subject.")
        if settings.OIDC_OP_ISSUER and issuer != settings.OIDC_OP_ISSUER:
            raise SuspiciousOperation(f"The ID token's issuer {issuer!r} is not OIDC_OP_ISSUER.")
        if self.OIDC_RP_CLIENT_ID not in ([audience] if isinstance(audience, str) else list(audience or [])):
            raise SuspiciousOperation("The ID token was issued to another client.")
        claims = self.get_userinfo(access_token, id_token, payload)
        if claims.get("sub", subject) != subject:
            raise SuspiciousOperation("The user info is about another subject than the ID token.")
        return oidc_user_sign_in(issuer=issuer, subject=subject, claims={**payload, **claims})
