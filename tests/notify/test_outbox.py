"""The outbox: one row per event and destination, delivered with signed JSON, retried with backoff."""

import hashlib
import hmac
import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.utils import timezone

from governance.notify.models import OutboxMessage
from governance.notify.services import GAVE_UP, backoff, notification_enqueue, outbox_deliver_due
from tests.factories import committed

pytestmark = pytest.mark.django_db
SECRET = "test-signing-secret"


class FlakyHook(BaseHTTPRequestHandler):
    """Answers 503 to the first `failures` requests, then 204; keeps what it accepted."""

    failures = 2
    seen: list = []
    accepted: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        FlakyHook.seen.append(body)
        if len(FlakyHook.seen) <= FlakyHook.failures:
            self.send_response(503)
        else:
            FlakyHook.accepted.append((self.headers, body))
            self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def flaky_url(settings):
    settings.WEBHOOK_ALLOW_HTTP, settings.WEBHOOK_ALLOWED_HOSTS = True, ["127.0.0.1"]  # a local receiver
    FlakyHook.seen, FlakyHook.accepted = [], []
    server = HTTPServer(("127.0.0.1", 0), FlakyHook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/hook"
    server.shutdown()


def test_a_webhook_that_fails_twice_gets_the_message_on_the_third_attempt_signed(settings, flaky_url):
    settings.GOVERNANCE_NOTIFY_SECRET = SECRET
    with committed():  # the first attempt runs right after the commit
        notification_enqueue(event="finding.opened", payload={"finding_id": 7}, destinations=[flaky_url])
    message = OutboxMessage.objects.get()
    assert message.attempts == 1 and message.last_error == "HTTP 503" and message.delivered_at is None

    start = timezone.now()
    assert outbox_deliver_due(now=start) == 0  # not due yet: backoff
    assert outbox_deliver_due(now=start + backoff(1)) == 0  # second attempt, refused again
    assert outbox_deliver_due(now=start + backoff(1) + backoff(2)) == 1

    message.refresh_from_db()
    assert message.attempts == 3 and message.delivered_at is not None and message.next_attempt_at is None
    assert len(FlakyHook.seen) == 3 and len(FlakyHook.accepted) == 1
    headers, body = FlakyHook.accepted[0]
    assert json.loads(body) == {"event": "finding.opened", "finding_id": 7}
    expected = hmac.new(SECRET.encode(), headers["X-GG-Timestamp"].encode() + b"." + body, hashlib.sha256)
    assert headers["X-GG-Signature"] == f"sha256={expected.hexdigest()}"
    assert outbox_deliver_due(now=start + timedelta(days=1)) == 0  # delivered once, never again


def test_backoff_doubles_up_to_its_maximum(settings):
    settings.GOVERNANCE_NOTIFY_RETRY_BASE_S, settings.GOVERNANCE_NOTIFY_RETRY_MAX_S = 30, 600

    assert [backoff(n).total_seconds() for n in range(1, 7)] == [30, 60, 120, 240, 480, 600]


def test_a_destination_that_never_answers_is_given_up_after_the_last_attempt_and_kept(settings):
    settings.GOVERNANCE_NOTIFY_MAX_ATTEMPTS = 2
    notification_enqueue(event="budget.threshold", payload={}, destinations=["http://127.0.0.1:9/closed"])
    later = timezone.now() + timedelta(hours=2)
    outbox_deliver_due(now=later)
    outbox_deliver_due(now=later + timedelta(hours=2))

    message = OutboxMessage.objects.get()
    assert message.attempts == 2 and message.next_attempt_at is None and message.status == "given up"
    assert message.last_error.startswith(GAVE_UP.split("{")[0])


def test_chat_and_email_destinations_go_through_apprise(settings, monkeypatch):
    import apprise

    sent = []
    monkeypatch.setattr(apprise.Apprise, "notify", lambda self, title, body, **kw: sent.append((title, body)) or True)
    settings.GOVERNANCE_NOTIFY_DESTINATIONS = ["slack://T000/B000/XXXX", "mailto://ops:pw@example.org"]
    notification_enqueue(event="finding.resolved", payload={"x": 1}, text="Finding resolved: idle_gpu")
    outbox_deliver_due(now=timezone.now() + timedelta(seconds=1))

    assert sent == [("[gpu-governance] finding.resolved", "Finding resolved: idle_gpu")] * 2
    assert OutboxMessage.objects.filter(delivered_at__isnull=False).count() == 2


def test_only_admins_list_the_outbox(client, cast):
    notification_enqueue(event="finding.opened", payload={"finding_id": 1}, destinations=["https://example.org/h"])

    client.force_login(cast.alice)
    assert client.get("/api/v1/notifications/").status_code == 403
    client.force_login(cast.admin)
    rows = client.get("/api/v1/notifications/").json()["results"]
    assert [(r["event"], r["status"], r["attempts"]) for r in rows] == [("finding.opened", "pending", 0)]
