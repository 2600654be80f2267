"""Rate limits keyed by API token (each token its own bucket), else by user, else by address.

Rates are settings (`REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`, from env): "user" for every
request, a named scope for a view that sets `throttle_scope` (ingest) instead of "user".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework.request import Request
from rest_framework.throttling import ScopedRateThrottle, UserRateThrottle

from governance.api.models import ApiToken

if TYPE_CHECKING:
    from rest_framework.views import APIView


def _ident(throttle: UserRateThrottle | ScopedRateThrottle, request: Request) -> str:
    if isinstance(request.auth, ApiToken):
        return f"token-{request.auth.pk}"
    if request.user and request.user.is_authenticated:
        return f"user-{request.user.pk}"
    return f"addr-{throttle.get_ident(request)}"


class TokenRateThrottle(UserRateThrottle):
    def allow_request(self, request: Request, view: APIView) -> bool:
        if getattr(view, "throttle_scope", None):
            return True  # a scoped view (ingest) is limited by its own rate, not the general one
        return super().allow_request(request, view)

    def get_cache_key(self, request: Request, view: APIView) -> str:
        return self.cache_format % {"scope": self.scope, "ident": _ident(self, request)}


class TokenScopedRateThrottle(ScopedRateThrottle):
    def get_cache_key(self, request: Request, view: APIView) -> str:
        return self.cache_format % {"scope": self.scope, "ident": _ident(self, request)}
