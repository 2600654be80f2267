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
    """The server did not take the batch now; it may later (down, overloaded, token not yet valid)."""


class BatchRefused(Exception):
    """The server will never take this batch (invalid records, too large, conflicting id)."""


# Statuses that say the batch itself is wrong: sending it again can never succeed.
REFUSED = {400, 409, 413, 422}


class Sender:
    def __init__(
        self, server: str, token: str, *, timeout: float = 30.0, attempts: int = 3, backoff: float = 1.0,
        backoff_max: float = 30.0, sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
    ) -> None:  # fmt: skip
        self.url = server.rstrip("/") + "/api/v1/ingest/"
        self.token = token
        self.timeout, self.attempts, self.backoff, self.backoff_max = timeout, attempts, backoff, backoff_max
        self.sleep = sleep
        self.rng = rng or random.Random()

    def post_once(self, gzipped: bytes) -> None:
        request = urllib.request.Request(  # noqa: S310 - the URL is the operator's
            self.url,
            data=gzipped,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Content-Encoding": "gzip",
                "Authorization": f"Bearer {self.token}",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:2000].decode(errors="replace")
            if exc.code in REFUSED:
                raise BatchRefused(f"HTTP {exc.code}: {_message(detail)}") from None
            raise SendFailed(f"HTTP {exc.code}: {_message(detail)}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise SendFailed(str(getattr(exc, "reason", exc))) from None

    def post(self, gzipped: bytes) -> None:
        """Try a few times, waiting backoff * 2^n (capped) with full jitter; then give up with SendFailed."""
        for attempt in range(self.attempts):
            try:
                return self.post_once(gzipped)
            except SendFailed as exc:
                if attempt + 1 == self.attempts:
                    raise
                delay = self.rng.uniform(0, min(self.backoff_max, self.backoff * 2**attempt))
                log.info("send failed (%s); retrying in %.1fs", exc, delay)
                self.sleep(delay)
        return None


def _message(body: str) -> str:
    try:
        error = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return body.strip()[:300]
    details = "; ".join(
        f"record {d.get('index')} {d.get('field')}: {d.get('reason')}" for d in error.get("details") or []
    )
    return f"{error.get('message', '')} {details}".strip()
