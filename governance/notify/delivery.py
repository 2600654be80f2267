"""Sending one outbox message: generic JSON to http(s) URLs, signed; Slack, Teams, email and the rest via apprise
(as plain text, which each service escapes for its own markup).

The signature is HMAC-SHA256 over `<timestamp>.<body>` with GOVERNANCE_NOTIFY_SECRET, sent as
`X-GG-Signature: sha256=<hex>` beside `X-GG-Timestamp: <unix seconds>`: a receiver recomputes it and refuses
old timestamps, so a captured request cannot be replayed later.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder

SIGNATURE = "X-GG-Signature"
TIMESTAMP = "X-GG-Timestamp"


class DeliveryFailed(Exception):
    """The destination did not take the message; the text is kept as the row's last error."""


def signature(*, secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def _post_json(url: str, payload: dict) -> None:
    body = json.dumps(payload, cls=DjangoJSONEncoder, sort_keys=True).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "gpu-governance"}
    secret = settings.GOVERNANCE_NOTIFY_SECRET
    if secret:
        timestamp = str(int(time.time()))
        headers |= {TIMESTAMP: timestamp, SIGNATURE: signature(secret=secret, timestamp=timestamp, body=body)}
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310 (http(s) only)
    try:
        with urllib.request.urlopen(request, timeout=settings.GOVERNANCE_NOTIFY_TIMEOUT_S) as response:  # noqa: S310
            if not 200 <= response.status < 300:
                raise DeliveryFailed(f"HTTP {response.status}")
    except urllib.error.HTTPError as exc:
        raise DeliveryFailed(f"HTTP {exc.code}") from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise DeliveryFailed(f"{type(exc).__name__}: {exc}") from exc


def _apprise(url: str, title: str, text: str) -> None:
    import apprise

    sender = apprise.Apprise()
    if not sender.add(url):
        raise DeliveryFailed("apprise does not understand this destination URL")
    # The text is plain text, and says what users and collectors wrote (job ids, user names, reasons): declared
    # as such, each service escapes it for its own markup (Slack: &, <, > as entities, so `<!channel>` mentions
    # nothing; Teams: its markdown; email: a plain-text message with no HTML part).
    if not sender.notify(title=title, body=text, body_format=apprise.NotifyFormat.TEXT):
        raise DeliveryFailed("apprise could not deliver (see the worker log)")


def deliver(*, destination: str, event: str, payload: dict, text: str) -> None:
    """Send or raise DeliveryFailed."""
    if destination.startswith(("http://", "https://")):
        _post_json(destination, {"event": event, **payload})
    else:
        _apprise(destination, f"[gpu-governance] {event}", text or json.dumps(payload, cls=DjangoJSONEncoder))
