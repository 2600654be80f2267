"""Replay of issue 25 item 11: what collectors and users wrote (a job id, a user name) reaches Slack, Teams and
email as text, never as markup: no `<!channel>` mention, no link, no HTML. The finding comes from the real ingest
path and rule evaluation; what is checked is what would go over the wire (requests and smtplib are the
boundary)."""

import json
from email import message_from_string

import pytest
import requests
from django.utils import timezone

from governance.efficiency.services import findings_evaluate_all
from governance.notify.models import OutboxMessage
from governance.notify.services import outbox_deliver_due
from tests.efficiency.conftest import a_job, gpu
from tests.factories import at, ingest, rate

pytestmark = pytest.mark.django_db
HOSTILE_JOB = "<!channel> *x* <http://evil|click>"
HOSTILE_USER = "<!here> <b>bob</b> [click](http://evil)"
SLACK = "slack://T1ABCDEFG/B2ABCDEFG/abcdefghijklmnopqrstuvwx"
TEAMS = "workflows://prod-01.westus.logic.azure.com:443/abc123/sigxyz"
EMAIL = "mailto://gg:secret@mail.example.org?to=lead@example.org"


class Wire:
    """What apprise would have sent: HTTP bodies by URL, SMTP messages."""

    def __init__(self) -> None:
        self.http: list[tuple[str, str]] = []
        self.mail: list[str] = []

    def request(self, method: str, url: str, **kwargs) -> requests.Response:
        self.http.append((url, kwargs.get("data") or ""))
        response = requests.Response()
        response.status_code, response._content = 200, b"ok"
        return response

    def smtp(wire, *args, **kwargs):  # a factory standing in for smtplib.SMTP
        class Smtp:
            def __getattr__(self, name):
                return lambda *a, **k: (250, b"ok")

            def sendmail(self, sender, to, message):
                wire.mail.append(message)
                return {}

        return Smtp()


@pytest.fixture
def wire(monkeypatch, settings) -> Wire:
    settings.GOVERNANCE_FINDINGS_WEBHOOK_URL = SLACK
    settings.GOVERNANCE_NOTIFY_DESTINATIONS = [TEAMS, EMAIL]
    seen = Wire()
    monkeypatch.setattr(requests, "request", seen.request)
    monkeypatch.setattr(requests, "post", lambda url, **kw: seen.request("POST", url, **kw))
    monkeypatch.setattr("smtplib.SMTP", seen.smtp)
    monkeypatch.setattr("smtplib.SMTP_SSL", seen.smtp)
    return seen


@pytest.fixture
def hostile_finding(cast):
    """An idle job whose id and user are chat markup, through the real ingest path and rules."""
    rate(price="2.00")
    ingest([a_job(minutes=120, job_id=HOSTILE_JOB, user=HOSTILE_USER), *gpu(minutes=120, sm_util=0.0,
                                                                            job_id=HOSTILE_JOB)])  # fmt: skip
    findings_evaluate_all(now=at("2026-11-10T00:00:00Z"))


def _deliver(wire: Wire) -> None:
    outbox_deliver_due(now=timezone.now() + timezone.timedelta(minutes=5))
    assert not OutboxMessage.objects.filter(delivered_at__isnull=True).exists(), list(
        OutboxMessage.objects.values_list("destination", "last_error")
    )


def test_slack_gets_the_job_id_and_user_escaped_with_no_mention_or_link(wire, hostile_finding):
    _deliver(wire)

    slack = [json.loads(body) for url, body in wire.http if "hooks.slack.com" in url]
    assert slack
    text = json.dumps(slack)
    assert "<!channel>" not in text and "<!here>" not in text and "<http://evil" not in text
    assert "&lt;!channel&gt;" in text and "&lt;http://evil|click&gt;" in text
    assert all(message.get("mrkdwn") is not True for message in slack)


def test_teams_gets_the_job_id_and_user_with_their_markdown_escaped(wire, hostile_finding):
    _deliver(wire)

    teams = [body for url, body in wire.http if "logic.azure.com" in url]
    assert teams
    texts = [b["text"] for t in teams for a in json.loads(t)["attachments"] for b in a["content"]["body"]
             if b.get("id") == "body"]  # fmt: skip
    assert texts and all("[click](http://evil)" not in t and "\\*x\\*" in t for t in texts)


def test_email_is_plain_text_with_no_html_part(wire, hostile_finding):
    _deliver(wire)

    assert wire.mail
    for raw in wire.mail:
        message = message_from_string(raw)
        types = [part.get_content_type() for part in message.walk() if not part.is_multipart()]
        assert types == ["text/plain"]
        assert "<!channel> *x*" in message.get_payload(decode=True).decode()  # shown as written, as text
