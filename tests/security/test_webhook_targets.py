"""Replays of issue 25 item 6: webhook targets are https on public addresses, checked when saved (API, admin)
and again when sent, after resolving the name, connecting to the address that was checked; no redirect is
followed; WEBHOOK_ALLOWED_HOSTS lets an on-prem receiver in."""

import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from governance.notify.models import OutboxMessage
from governance.notify.services import notification_enqueue, outbox_deliver_due
from tests.factories import committed

pytestmark = pytest.mark.django_db
BUDGETS = "/api/v1/budgets/"

FORBIDDEN = [
    "https://127.0.0.1/hook", "https://127.1/hook", "https://2130706433/hook", "https://0177.0.0.1/hook",
    "https://0x7f.0.0.1/hook", "https://[::1]/hook", "https://[::ffff:127.0.0.1]/hook", "https://[::ffff:7f00:1]/hook",
    "https://[64:ff9b::7f00:1]/hook", "https://[2002:7f00:1::]/hook", "https://localhost/hook",
    "https://169.254.169.254/latest/meta-data/", "https://[fe80::1]/hook", "https://10.0.0.1/hook",
    "https://172.16.0.1/hook", "https://192.168.1.1/hook", "https://100.64.0.1/hook", "https://[fd00::1]/hook",
    "https://224.0.0.1/hook", "https://[ff02::1]/hook", "https://240.0.0.1/hook", "https://0.0.0.0/hook",
    "https://[::]/hook", "http://hooks.example.org/hook",
]  # fmt: skip


class Receiver(BaseHTTPRequestHandler):
    """Keeps what it was sent; answers `reply` (with `location` on a redirect)."""

    reply, location, seen = 204, "", []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Receiver.seen.append((self.path, self.headers.get("Host"), body))
        self.send_response(Receiver.reply)
        if Receiver.location:
            self.send_header("Location", Receiver.location)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    Receiver.reply, Receiver.location, Receiver.seen = 204, "", []
    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_port
    server.shutdown()


@pytest.fixture
def connections(monkeypatch) -> list:
    """Every TCP connection the sender opens."""
    opened: list = []
    real = socket.create_connection

    def create_connection(address, *args, **kwargs):
        opened.append(address)
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", create_connection)
    return opened


def resolve_to(monkeypatch, mapping: dict[str, str]) -> None:
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host in mapping:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (mapping[host], port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def sent(url: str) -> OutboxMessage:
    with committed():
        notification_enqueue(event="budget.threshold", payload={"team": "nlp"}, destinations=[url])
    outbox_deliver_due()
    return OutboxMessage.objects.get(destination=url)


@pytest.mark.parametrize("url", FORBIDDEN)
def test_it_refuses_a_forbidden_webhook_url_when_a_budget_is_saved_through_the_api(client, cast, url):
    client.force_login(cast.nlp_lead)

    response = client.post(BUDGETS, {"team": "nlp", "month": "2026-12", "amount": "100.00", "webhook_url": url},
                           content_type="application/json")  # fmt: skip

    assert response.status_code == 400
    assert "webhook_url" in response.json()["error"]["details"]
    assert not cast.nlp.budgets.exists()


@pytest.mark.parametrize("url", ["https://169.254.169.254/latest/", "https://[::ffff:10.0.0.1]/", "https://127.1/"])
def test_it_refuses_a_forbidden_webhook_url_in_the_admin_naming_the_field(client, cast, url):
    cast.admin.is_superuser = True
    cast.admin.save()
    client.force_login(cast.admin)
    form = {"team": cast.nlp.pk, "month": "2026-12-01", "amount": "100.00", "currency": "USD", "thresholds": "[]",
            "webhook_url": url}  # fmt: skip

    response = client.post("/admin/costs/budget/add/", form)

    assert response.status_code == 200
    assert "webhook_url" in response.context["adminform"].form.errors
    assert not cast.nlp.budgets.exists()


@pytest.mark.parametrize("url", FORBIDDEN)
def test_it_refuses_to_send_to_a_forbidden_address_saved_before_the_check(cast, connections, url):
    message = sent(url)

    assert message.delivered_at is None and message.last_error.startswith("refused")
    assert connections == []


def test_it_refuses_a_name_that_resolves_to_loopback_at_send_time(cast, settings, monkeypatch, receiver, connections):
    settings.WEBHOOK_ALLOW_HTTP = True
    resolve_to(monkeypatch, {"hooks.example.org": "127.0.0.1"})
    url = f"http://hooks.example.org:{receiver}/hook"

    message = sent(url)

    assert message.delivered_at is None and "127.0.0.1, a loopback address" in message.last_error
    assert connections == [] and Receiver.seen == []


def test_it_sends_to_an_allowlisted_on_prem_receiver_connecting_to_the_address_it_checked(
    cast, settings, monkeypatch, receiver, connections
):
    settings.WEBHOOK_ALLOW_HTTP, settings.WEBHOOK_ALLOWED_HOSTS = True, ["127.0.0.0/8"]
    resolve_to(monkeypatch, {"alerts.corp.example": "127.0.0.1"})
    url = f"http://alerts.corp.example:{receiver}/hook?team=nlp"

    message = sent(url)

    assert message.delivered_at is not None
    assert connections == [("127.0.0.1", receiver)]
    assert [(path, host) for path, host, _ in Receiver.seen] == [("/hook?team=nlp", f"alerts.corp.example:{receiver}")]


def test_it_does_not_follow_a_redirect(cast, settings, receiver, connections):
    settings.WEBHOOK_ALLOW_HTTP, settings.WEBHOOK_ALLOWED_HOSTS = True, ["127.0.0.1"]
    Receiver.reply, Receiver.location = 302, "http://169.254.169.254/latest/meta-data/"

    message = sent(f"http://127.0.0.1:{receiver}/hook")

    assert message.delivered_at is None and "redirects are not followed" in message.last_error
    assert connections == [("127.0.0.1", receiver)] and len(Receiver.seen) == 1


def test_an_allowlisted_host_name_may_be_saved_for_a_budget(client, cast, settings):
    settings.WEBHOOK_ALLOWED_HOSTS = ["localhost"]
    client.force_login(cast.nlp_lead)

    body = {"team": "nlp", "month": "2026-12", "amount": "100.00", "webhook_url": "https://localhost/hook"}

    response = client.post(BUDGETS, body, content_type="application/json")

    assert response.status_code == 201


@pytest.mark.parametrize("url", ["json://127.0.0.1/hook", "jsons://169.254.169.254/", "form://[::1]:8080/x"])
def test_it_refuses_apprise_http_destinations_that_point_at_forbidden_addresses(cast, settings, connections, url):
    settings.WEBHOOK_ALLOW_HTTP = True

    message = sent(url)

    assert message.delivered_at is None and message.last_error.startswith("refused")
    assert connections == []
