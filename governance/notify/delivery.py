"""Sending one outbox message: generic JSON to http(s) URLs, signed; Slack, Teams, email and the rest via apprise.

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
EMAIL = "email:"


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
    if not sender.notify(title=title, body=text):
        raise DeliveryFailed("apprise could not deliver (see the worker log)")


def _email(address: str, subject: str, text: str) -> None:
    from django.core.mail import send_mail

    try:
        send_mail(subject, text, None, [address])
    except Exception as exc:  # SMTP refused or unreachable: the row is retried with backoff
        raise DeliveryFailed(f"{type(exc).__name__}: {exc}") from exc


def deliver(*, destination: str, event: str, payload: dict, text: str) -> None:
    """Send or raise DeliveryFailed. `email:<address>` (a team lead) goes out through Django's email backend."""
    if destination.startswith(EMAIL):
        _email(destination.removeprefix(EMAIL), f"[gpu-governance] {event}", text)
    elif destination.startswith(("http://", "https://")):
        _post_json(destination, {"event": event, **payload})
    else:
        _apprise(destination, f"[gpu-governance] {event}", text or json.dumps(payload, cls=DjangoJSONEncoder))
