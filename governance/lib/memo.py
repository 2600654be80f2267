"""What a page reads more than once, read once per request.

A page is assembled from selectors that each answer on their own, and several of them ask the same small question
(is this month closed?) on the way: the team month page asked it twelve times. Inside a read-only request
(GET, HEAD, OPTIONS) `memoised` keeps each answer by its key for the rest of the request; outside one (a write, a
task, a command, a test calling a selector) it computes every time, so nothing a write changes is read stale. What
is memoised must be something no read-only request changes (none closes a month).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from contextvars import ContextVar
from typing import TypeVar

from django.http import HttpRequest, HttpResponse

T = TypeVar("T")

_memo: ContextVar[dict[Hashable, object] | None] = ContextVar("request_memo", default=None)
READ_ONLY = frozenset({"GET", "HEAD", "OPTIONS"})


def memoised(key: Hashable, compute: Callable[[], T]) -> T:
    """`compute()`, or inside a read-only request what it gave the first time `key` was asked."""
    memo = _memo.get()
    if memo is None:
        return compute()
    if key not in memo:
        memo[key] = compute()
    return memo[key]  # type: ignore[return-value]


class ReadMemoMiddleware:
    """Gives each read-only request a memo of its own, dropped with its answer."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method not in READ_ONLY:
            return self.get_response(request)
        token = _memo.set({})
        try:
            return self.get_response(request)
        finally:
            _memo.reset(token)
