"""API tokens: `Authorization: Bearer ggt_...`, looked up by hash, scoped."""

from django.utils import timezone
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from governance.api.models import ApiToken, hash_token

TOKEN_INVALID = "Invalid or revoked API token."


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() not in (b"bearer", b"token"):
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
        raw = header[1].decode(errors="replace")
        token = ApiToken.objects.active().select_related("user").filter(key_hash=hash_token(raw)).first()
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed(TOKEN_INVALID)
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


SCOPES_GRANTING = {
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
