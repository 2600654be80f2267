"""Rate limits keyed by API token (each token its own bucket), else by user, else by address.

Rates are settings (`REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`, from env): "user" for every
request, a named scope for a view that sets `throttle_scope` (ingest) instead of "user".

Requests are counted per fixed window of the rate's period (a minute for "600/min"): one counter per client,
incremented per request by one atomic statement (governance/api/counters.py). DRF's own throttles keep a list of
every request's time in the period and write it back whole each request, so their cost grows with the rate: a
fleet's collectors sending 200 batches a second on one token rewrote a list of 12,000 times per POST. A client may
send up to twice the rate across the boundary of two windows, as with the invalid-token counts (api/auth.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework.request import Request
from rest_framework.throttling import ScopedRateThrottle, SimpleRateThrottle, UserRateThrottle

from governance.api.counters import window_count_up, window_end_at
from governance.api.models import ApiToken

if TYPE_CHECKING:
    from rest_framework.views import APIView


def _ident(throttle: UserRateThrottle | ScopedRateThrottle, request: Request) -> str:
    if isinstance(request.auth, ApiToken):
        return f"token-{request.auth.pk}"
    if request.user and request.user.is_authenticated:
        return f"user-{request.user.pk}"
    return f"addr-{throttle.get_ident(request)}"


class WindowCountThrottle(SimpleRateThrottle):
    """SimpleRateThrottle counting in fixed windows (see the module's docstring)."""

    num_requests: int
    duration: int
    _wait_s: float = 0.0

    def allow_request(self, request: Request, view: APIView) -> bool:
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        now = self.timer()
        window_end = window_end_at(now, self.duration)
        count = window_count_up(key, window_end=window_end)
        self._wait_s = window_end - now
        return count <= self.num_requests

    def wait(self) -> float:
        return self._wait_s


class TokenRateThrottle(UserRateThrottle, WindowCountThrottle):
    def allow_request(self, request: Request, view: APIView) -> bool:
        if getattr(view, "throttle_scope", None):
            return True  # a scoped view (ingest) is limited by its own rate, not the general one
        return super().allow_request(request, view)

    def get_cache_key(self, request: Request, view: APIView) -> str:
        return self.cache_format % {"scope": self.scope, "ident": _ident(self, request)}


class TokenScopedRateThrottle(ScopedRateThrottle, WindowCountThrottle):
    def get_cache_key(self, request: Request, view: APIView) -> str:
        return self.cache_format % {"scope": self.scope, "ident": _ident(self, request)}
