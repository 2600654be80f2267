"""API tokens: `Authorization: Bearer ggt_...`, looked up by hash, scoped, expiring.

Failed lookups are counted per client address (governance/api/counters.py: in the database unless CACHE_URL is set):
past API_TOKEN_FAILURES_PER_MINUTE in a minute, that address's invalid tokens get 429 instead of 401. A valid
token is looked up first and never refused for what others sent from its address.

An ingest token found valid is kept in the process for API_TOKEN_CACHE_S seconds (governance/api/token_cache.py):
a collector's POSTs then authenticate without a query, and a revocation reaches every process within that time.
"""

import copy
import time

from django.conf import settings
from django.utils import timezone
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from governance.api.counters import window_count_up, window_end_at
from governance.api.models import ApiToken, hash_token
from governance.api.token_cache import token_remember, token_remembered
from governance.lib.replica import token_authenticated

# Scopes only a platform admin may hold (governance/api/services.py refuses to issue them to anyone else).
ADMIN_ONLY_SCOPES = {ApiToken.Scope.ADMIN, ApiToken.Scope.INGEST}

TOKEN_INVALID = "Invalid, expired or revoked API token."
TOO_MANY_FAILURES = "Too many invalid API tokens from this address; try again in a minute."
FAILURE_WINDOW_S = 60


def _failure_key(request: Request) -> str:
    return f"gg:token-failures:{BaseThrottle().get_ident(request)}"


def _failures_exceeded(request: Request) -> bool:
    """One more invalid token from the request's address (one statement); whether it is past the minute's limit."""
    count = window_count_up(_failure_key(request), window_end=window_end_at(time.time(), FAILURE_WINDOW_S))
    return count > settings.API_TOKEN_FAILURES_PER_MINUTE


def _token_found(digest: str, now) -> ApiToken | None:
    """The active token of `digest` (its user with it): from this process's recent lookups where it is an
    ingest token seen less than API_TOKEN_CACHE_S ago, else from the database. A copy: a request may set
    attributes on its token or user without another request (another thread) seeing them."""
    ttl = settings.API_TOKEN_CACHE_S
    kept = token_remembered(digest, ttl_s=ttl) if ttl > 0 else None
    if kept is None:
        kept = ApiToken.objects.active(now).select_related("user").filter(key_hash=digest).first()
        if kept is None:
            return None
        if ttl > 0 and kept.scope == ApiToken.Scope.INGEST:
            token_remember(digest, kept)
    elif kept.expires_at <= now:
        return None
    token = copy.copy(kept)
    token.user = copy.copy(kept.user)
    return token


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() not in (b"bearer", b"token"):
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
        raw = header[1].decode(errors="replace")
        now = timezone.now()
        digest = hash_token(raw)
        token = _token_found(digest, now)
        if token is None or not token.user.is_active:
            # Only the sender of bad tokens is slowed down: a good token from the same address (a NAT, a proxy)
            # was looked up above and never reaches this count.
            if _failures_exceeded(request):
                wait = FAILURE_WINDOW_S - time.time() % FAILURE_WINDOW_S
                raise exceptions.Throttled(wait=wait, detail=TOO_MANY_FAILURES)
            raise exceptions.AuthenticationFailed(TOKEN_INVALID)
        if token.scope in ADMIN_ONLY_SCOPES and not token.user.is_platform_admin:
            # Its holder is no longer a platform admin: the token goes with the role.
            raise exceptions.AuthenticationFailed(TOKEN_INVALID)
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
            kept = token_remembered(digest, ttl_s=settings.API_TOKEN_CACHE_S)
            if kept is not None:
                kept.last_used_at = now  # the next requests within the minute update nothing
        # Found on the primary: a read may go on on the replica, a write marks where its user's next reads start.
        token_authenticated(request._request, user_id=token.user.pk, marks_writes=token.scope != ApiToken.Scope.INGEST)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


SCOPES_GRANTING: dict[str, set[str]] = {
    ApiToken.Scope.INGEST: {ApiToken.Scope.INGEST, ApiToken.Scope.ADMIN},
    ApiToken.Scope.READ: {ApiToken.Scope.READ, ApiToken.Scope.WRITE, ApiToken.Scope.ADMIN},
    ApiToken.Scope.WRITE: {ApiToken.Scope.WRITE, ApiToken.Scope.ADMIN},
    ApiToken.Scope.ADMIN: {ApiToken.Scope.ADMIN},
}


def token_allows(auth: object, scope: str) -> bool:
    """Session users (auth is None) pass; tokens must carry a scope that grants `scope`."""
    if isinstance(auth, ApiToken):
        return auth.scope in SCOPES_GRANTING[scope]
    return auth is None


class HasIngestScope(permissions.BasePermission):
    message = "This endpoint needs an API token with the ingest scope."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, ApiToken) and token_allows(request.auth, ApiToken.Scope.INGEST)


class HasReadScope(permissions.BasePermission):
    """Reads need a signed-in session or a read/write/admin token; an ingest token reads nothing."""

    message = "This endpoint needs a session or an API token with the read scope."

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        needed = ApiToken.Scope.READ if request.method in permissions.SAFE_METHODS else ApiToken.Scope.WRITE
        return token_allows(request.auth, needed)
