"""Ingest tokens this process looked up lately, by their hash: a collector's next POSTs authenticate without a query.

An entry lives API_TOKEN_CACHE_S seconds (0: no cache), so a token revoked, expired, or whose user was deactivated
or lost the platform-admin role, stops authenticating in every web process within that many seconds; in the process
that revoked it, at once. Only tokens found valid are kept: an unknown token is looked up (and counted) every time.
"""

from __future__ import annotations

import threading
import time
from typing import Any

MAX_ENTRIES = 10_000  # tokens, not requests: a fleet's collectors hold a few each

_recent: dict[str, tuple[float, Any]] = {}
_lock = threading.Lock()


def token_remembered(digest: str, *, ttl_s: float) -> Any | None:
    """The token kept for `digest` if it was looked up less than `ttl_s` seconds ago, else None."""
    entry = _recent.get(digest)
    if entry is None:
        return None
    if time.monotonic() - entry[0] >= ttl_s:
        with _lock:
            if _recent.get(digest) is entry:
                del _recent[digest]
        return None
    return entry[1]


def token_remember(digest: str, token: Any) -> None:
    with _lock:
        if len(_recent) >= MAX_ENTRIES:
            _recent.clear()
        _recent[digest] = (time.monotonic(), token)


def token_forget(digest: str) -> None:
    with _lock:
        _recent.pop(digest, None)
