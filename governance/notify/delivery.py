"""Sending one outbox message: generic JSON to http(s) URLs, signed; Slack, Teams, email and the rest via apprise
(as plain text, which each service escapes for its own markup).

The signature is HMAC-SHA256 over `<timestamp>.<body>` with GOVERNANCE_NOTIFY_SECRET, sent as
`X-GG-Signature: sha256=<hex>` beside `X-GG-Timestamp: <unix seconds>`: a receiver recomputes it and refuses
old timestamps, so a captured request cannot be replayed later.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import socket
import ssl
import time

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder

from governance.notify.targets import webhook_target_resolve

SIGNATURE = "X-GG-Signature"
TIMESTAMP = "X-GG-Timestamp"
EMAIL = "email:"


class DeliveryFailed(Exception):
    """The destination did not take the message; the text is kept as the row's last error."""


def signature(*, secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to the address that was checked, whatever the name resolves to by then."""

    def __init__(self, host: str, *, address: str, **kwargs) -> None:
        super().__init__(host, **kwargs)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """Connects to the checked address; TLS still verifies the certificate against the name (SNI too)."""

    def __init__(self, host: str, *, address: str, **kwargs) -> None:
        self._tls = ssl.create_default_context()
        super().__init__(host, context=self._tls, **kwargs)
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)


def _post_json(url: str, payload: dict) -> None:
    try:
        parts, address = webhook_target_resolve(url)
    except ValidationError as exc:
        raise DeliveryFailed(f"refused: {url!r} {'; '.join(exc.messages)}") from exc
    body = json.dumps(payload, cls=DjangoJSONEncoder, sort_keys=True).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "gpu-governance"}
    secret = settings.GOVERNANCE_NOTIFY_SECRET
    if secret:
        timestamp = str(int(time.time()))
        headers |= {TIMESTAMP: timestamp, SIGNATURE: signature(secret=secret, timestamp=timestamp, body=body)}
    kind = _PinnedHTTPSConnection if parts.scheme.lower() == "https" else _PinnedHTTPConnection
    connection = kind(parts.hostname or "", port=parts.port, address=address,
                      timeout=settings.GOVERNANCE_NOTIFY_TIMEOUT_S)  # fmt: skip
    path = parts.path or "/"
    try:
        connection.request("POST", f"{path}?{parts.query}" if parts.query else path, body=body, headers=headers)
        status = connection.getresponse().status
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise DeliveryFailed(f"{type(exc).__name__}: {exc}") from exc
    finally:
        connection.close()
    if 300 <= status < 400:
        raise DeliveryFailed(f"HTTP {status}: redirects are not followed")
    if not 200 <= status < 300:
        raise DeliveryFailed(f"HTTP {status}")


# apprise's generic HTTP notifications POST wherever their URL says: checked like a webhook before apprise sends.
APPRISE_HTTP = {"json": "http", "jsons": "https", "xml": "http", "xmls": "https", "form": "http", "forms": "https"}


def _apprise(url: str, title: str, text: str) -> None:
    import apprise

    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower() in APPRISE_HTTP:
        try:
            webhook_target_resolve(f"{APPRISE_HTTP[scheme.lower()]}://{rest}")
        except ValidationError as exc:
            raise DeliveryFailed(f"refused: {url!r} {'; '.join(exc.messages)}") from exc

    sender = apprise.Apprise()
    if not sender.add(url):
        raise DeliveryFailed("apprise does not understand this destination URL")
    # The text is plain text, and says what users and collectors wrote (job ids, user names, reasons): declared
    # as such, each service escapes it for its own markup (Slack: &, <, > as entities, so `<!channel>` mentions
    # nothing; Teams: its markdown; email: a plain-text message with no HTML part).
    if not sender.notify(title=title, body=text, body_format=apprise.NotifyFormat.TEXT):
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
