"""Posts gzipped batches to the ingest endpoint with a bearer token (urllib only), retrying with backoff."""

from __future__ import annotations

import json
import logging
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable

log = logging.getLogger("gpu-collector")


class SendFailed(Exception):
    """The server did not take the batch now; it may later (down, overloaded)."""


class TokenRefused(SendFailed):
    """The server refuses the token, not the batch: unknown, expired or revoked (401), not allowed to ingest (403),
    or bound to other clusters than the records name (400 `cluster_not_allowed`). The batch is sound: it waits
    until an admin fixes the token. Sending again before that cannot help, so it is not retried at once."""


class BatchRefused(Exception):
    """The server will never take this batch, for what it holds (invalid records, too large, conflicting id)."""


# Statuses that say the batch itself is wrong: sending it again can never succeed.
REFUSED = {400, 409, 413, 422}
# What says the token is wrong: its status, or the error code of a 400.
TOKEN_STATUSES = {401, 403}
TOKEN_CODES = {"cluster_not_allowed"}


class Sender:
    def __init__(
        self, server: str, token: str, *, timeout: float = 30.0, attempts: int = 3, backoff: float = 1.0,
        backoff_max: float = 30.0, sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
    ) -> None:  # fmt: skip
        self.server = server.rstrip("/")
        self.url = self.server + "/api/v1/ingest/"
        self.token = token
        self.timeout, self.attempts, self.backoff, self.backoff_max = timeout, attempts, backoff, backoff_max
        self.sleep = sleep
        self.rng = rng or random.Random()

    def post_once(self, gzipped: bytes, *, path: str | None = None) -> None:
        """POST a gzipped batch to the ingest endpoint, or plain JSON to another `path` of the API (the topology)."""
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"}
        if path is None:
            headers["Content-Encoding"] = "gzip"
        request = urllib.request.Request(  # noqa: S310 - the URL is the operator's
            self.url if path is None else self.server + path, data=gzipped, method="POST", headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                response.read()
        except urllib.error.HTTPError as exc:
            code, message = _error(exc.read()[:20_000].decode(errors="replace"))
            what = f"HTTP {exc.code}{f' {code}' if code else ''}: {message}"
            if exc.code in TOKEN_STATUSES or (exc.code in REFUSED and code in TOKEN_CODES):
                raise TokenRefused(what) from None
            if exc.code in REFUSED:
                raise BatchRefused(what) from None
            raise SendFailed(what) from None
        except (urllib.error.URLError, OSError) as exc:
            raise SendFailed(str(getattr(exc, "reason", exc))) from None

    def post(self, gzipped: bytes, *, path: str | None = None) -> None:
        """Try a few times, waiting backoff * 2^n (capped) with full jitter; then give up with SendFailed."""
        for attempt in range(self.attempts):
            try:
                return self.post_once(gzipped, path=path)
            except TokenRefused:
                raise
            except SendFailed as exc:
                if attempt + 1 == self.attempts:
                    raise
                delay = self.rng.uniform(0, min(self.backoff_max, self.backoff * 2**attempt))
                log.info("send failed (%s); retrying in %.1fs", exc, delay)
                self.sleep(delay)
        return None


def _error(body: str) -> tuple[str, str]:
    """(code, message) of the API's error shape; ("", the body's start) for anything else."""
    try:
        error = json.loads(body)["error"]
        code = str(error.get("code") or "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return "", body.strip()[:300]
    details = error.get("details")
    if isinstance(details, list):
        shown = "; ".join(
            f"record {d.get('index')} {d.get('field')}: {d.get('reason')}" for d in details[:3] if isinstance(d, dict)
        )
        details = shown + (f"; and {len(details) - 3} more" if len(details) > 3 else "")
    return code, f"{error.get('message', '')} {details or ''}".strip()[:1000]
