from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from collectors.records import CLUSTER_NAME, CLUSTER_NAME_RULE
from governance.api.audit import audit_entry_write
from governance.api.models import ApiToken, AuditEntry, hash_token
from governance.org.models import User

ADMIN_SCOPE_FOR_ADMINS = "Only platform admins may hold an admin-scoped token."
INGEST_SCOPE_FOR_ADMINS = "Only platform admins may issue ingest tokens."
NAME_TAKEN = "You already have a token with this name."
EXPIRY_PAST = "The expiry must be in the future."
EXPIRY_TOO_FAR = "A token may live at most {days} days; pick an expiry before {latest:%Y-%m-%d %H:%M} UTC."
# Scopes only a platform admin may hold: an admin token mints tokens, an ingest token writes usage of any team.
ADMIN_ONLY_SCOPES: dict[str, str] = {
    ApiToken.Scope.ADMIN: ADMIN_SCOPE_FOR_ADMINS,
    ApiToken.Scope.INGEST: INGEST_SCOPE_FOR_ADMINS,
}


class TokenRefused(ValueError):
    """A token that may not be created; the message says why (field: `field`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def api_token_scope_check(*, user: User, scope: str) -> None:
    if scope not in ApiToken.Scope.values:
        raise TokenRefused("scope", f"scope {scope!r} is not one of {', '.join(ApiToken.Scope.values)}")
    if scope in ADMIN_ONLY_SCOPES and not user.is_platform_admin:
        raise TokenRefused("scope", ADMIN_ONLY_SCOPES[scope])


def api_token_expiry(*, expires_at: datetime | None, now: datetime | None = None) -> datetime:
    """The expiry a new token gets: the default lifetime, or the one asked for within the maximum."""
    now = now or timezone.now()
    if expires_at is None:
        return now + timedelta(days=settings.API_TOKEN_DEFAULT_DAYS)
    latest = now + timedelta(days=settings.API_TOKEN_MAX_DAYS)
    if expires_at <= now:
        raise TokenRefused("expires_at", EXPIRY_PAST)
    if expires_at > latest:
        raise TokenRefused("expires_at", EXPIRY_TOO_FAR.format(days=settings.API_TOKEN_MAX_DAYS, latest=latest))
    return expires_at


def api_token_create(
    *, user: User, name: str, scope: str, clusters: Iterable[str] = (), expires_at: datetime | None = None,
    now: datetime | None = None,
) -> tuple[ApiToken, str]:  # fmt: skip
    """Create a token for `user`, bound to the `clusters` it may report usage for; the raw value is returned
    once and never stored.

    Raises TokenRefused for a scope the user may not hold, a bad cluster name or an expiry out of bounds.
    """
    api_token_scope_check(user=user, scope=scope)
    clusters = sorted(set(clusters))
    if bad := [c for c in clusters if not CLUSTER_NAME.fullmatch(c)]:
        raise TokenRefused("clusters", f"{bad[0]!r}: cluster names {CLUSTER_NAME_RULE}")
    expiry = api_token_expiry(expires_at=expires_at, now=now)
    raw = ApiToken.generate()
    token = ApiToken.objects.create(
        user=user,
        name=name,
        scope=scope,
        prefix=raw[:10],
        key_hash=hash_token(raw),
        clusters=clusters,
        expires_at=expiry,
    )
    return token, raw


def api_token_revoke(*, token: ApiToken, actor: User, via: ApiToken | None = None) -> ApiToken:
    """Revoke once (the audit log records it as `revoke`); revoking a revoked token changes nothing."""
    if token.revoked_at is None:
        token.revoke()
    return token


def audit_entry_record(
    *,
    actor: User | None,
    token: ApiToken | None,
    action: str,
    instance: models.Model,
    changes: dict[str, list[object]] | None = None,
    object_pk: object = None,
) -> AuditEntry:
    """Record one change the model signals do not see (a decision, a bulk write); runs inside the writer's
    transaction so a rolled-back write leaves no entry. Door, path and address come from the current door;
    `actor` and `token`, when given, say who."""
    who: dict[str, object] = {}
    if actor is not None and actor.is_authenticated:
        who |= {"actor_id": actor.pk, "actor_name": actor.get_username()}
    if token is not None:
        who |= {"token_id": token.pk, "token_name": token.name}
    return audit_entry_write(
        action=action,
        model=instance._meta.label_lower,
        object_pk=instance.pk if object_pk is None else object_pk,
        object_repr=str(instance),
        changes=changes or {},
        **who,
    )
