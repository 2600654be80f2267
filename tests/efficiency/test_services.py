import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
import time_machine
from django.core import mail
from django.core.management import call_command

from governance.efficiency.models import ClusterAlert, Finding, JobEvaluation
from governance.efficiency.notifications import cluster_alerts_check, digests_send
from governance.efficiency.services import (
    REASON_REQUIRED,
    FindingStateError,
    finding_dismiss,
    findings_evaluate_all,
    findings_evaluate_ended,
    findings_evaluate_running,
)
from governance.notify.models import OutboxMessage
from tests.efficiency.conftest import START, a_job, gpu
from tests.factories import at, ingest, iso, job_record, rate

pytestmark = pytest.mark.django_db
LATER = at("2026-11-10T00:00:00Z")


@pytest.fixture
def idle_job(cast):
    rate(price="2.00")
    ingest([a_job(minutes=120), *gpu(minutes=120, sm_util=0.0)])


def live(rule: str = "idle_gpu"):
    return Finding.objects.filter(rule=rule, state__in=["open", "acknowledged"])


def test_evaluating_twice_keeps_one_live_finding_per_job_and_rule(idle_job):
    findings_evaluate_all(now=LATER)
    findings_evaluate_all(now=LATER)

    assert live().count() == 1


def test_an_ended_job_is_evaluated_finally_once_its_last_samples_are_in(idle_job):
    assert findings_evaluate_ended(now=at("2026-11-03T11:05:00Z")).jobs == 0  # ended 5 min ago: wait

    assert findings_evaluate_ended(now=LATER).jobs == 1
    assert JobEvaluation.objects.get().final_at == LATER
    assert findings_evaluate_ended(now=LATER).jobs == 0


def test_a_finding_resolves_itself_when_the_job_stops_showing_it(cast):
    rate(price="2.00")
    ingest([a_job(minutes=60, end_time=None, state="running"), *gpu(minutes=60, sm_util=10.0)])
    findings_evaluate_running(now=at("2026-11-03T10:00:00Z"))
    assert live("low_utilization").count() == 1

    with time_machine.travel(at("2026-11-03T21:00:00Z"), tick=False):  # pricing the new hours re-evaluates the job
        ingest(gpu(minutes=600, offset=60, sm_util=95.0))  # mean SM now 87%

    assert live("low_utilization").count() == 0
    resolved = Finding.objects.get(rule="low_utilization")
    assert resolved.state == "resolved" and resolved.resolved_at == at("2026-11-03T21:00:00Z")


def test_a_dismissed_finding_needs_a_reason_and_does_not_come_back(idle_job, cast):
    findings_evaluate_all(now=LATER)
    finding = live().get()

    with pytest.raises(FindingStateError, match=REASON_REQUIRED):
        finding_dismiss(finding_id=finding.pk, user=cast.alice, reason="  ")
    finding_dismiss(finding_id=finding.pk, user=cast.alice, reason="debug session, on purpose")
    findings_evaluate_all(now=LATER)

    assert live().count() == 0
    assert Finding.objects.get(rule="idle_gpu").dismissed_reason == "debug session, on purpose"


def test_evaluate_findings_command_evaluates_every_job(idle_job, capsys):
    with time_machine.travel(LATER, tick=False):
        call_command("evaluate_findings")

    assert "jobs: 1 opened:" in capsys.readouterr().out
    assert live().count() == 1


class Hook(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):
        Hook.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def hook_url(settings):
    settings.WEBHOOK_ALLOW_HTTP, settings.WEBHOOK_ALLOWED_HOSTS = True, ["127.0.0.1"]  # a local receiver
    Hook.received = []
    server = HTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook"
    server.shutdown()


def test_each_new_finding_is_posted_to_the_webhook_once(
    idle_job, settings, hook_url, django_capture_on_commit_callbacks
):
    settings.GOVERNANCE_FINDINGS_WEBHOOK_URL = hook_url
    with django_capture_on_commit_callbacks(execute=True):
        findings_evaluate_all(now=LATER)
    with django_capture_on_commit_callbacks(execute=True):
        findings_evaluate_all(now=LATER)

    idle = [p for p in Hook.received if p["rule"] == "idle_gpu"]
    assert len(idle) == 1 and idle[0]["event"] == "finding.opened" and idle[0]["job_id"] == "4242"
    assert idle[0]["savings_last_30_days"] == "4.00" and idle[0]["waste"] == "4.00"
    assert OutboxMessage.objects.get(payload__rule="idle_gpu").delivered_at is not None


def test_a_failing_webhook_loses_no_finding(idle_job, settings, caplog, django_capture_on_commit_callbacks):
    settings.WEBHOOK_ALLOW_HTTP, settings.WEBHOOK_ALLOWED_HOSTS = True, ["127.0.0.1"]  # a local receiver, down
    settings.GOVERNANCE_FINDINGS_WEBHOOK_URL = "http://127.0.0.1:9/unreachable"
    with django_capture_on_commit_callbacks(execute=True):
        findings_evaluate_all(now=LATER)

    assert live().count() == 1
    message = OutboxMessage.objects.get(payload__rule="idle_gpu")
    assert message.attempts == 1 and message.delivered_at is None and message.next_attempt_at is not None
    assert "ConnectionRefusedError" in message.last_error


def test_the_weekly_digest_goes_to_the_engineer_and_the_lead_sorted_by_money(cast):
    rate(price="2.00")
    cast.alice.email, cast.nlp_lead.email = "alice@example.org", "lead@example.org"
    cast.alice.save()
    cast.nlp_lead.save()
    ingest([a_job(minutes=120), *gpu(minutes=120, sm_util=0.0)])
    ingest([a_job(minutes=600, job_id="big", user="bob"), *gpu(minutes=600, sm_util=0.0, job_id="big", uuid="G2")])
    findings_evaluate_all(now=LATER)

    assert digests_send() == 2
    to = {m.to[0]: m for m in mail.outbox}
    assert "job big" not in to["alice@example.org"].body  # bob's job is not alice's
    lead = to["lead@example.org"].body
    assert lead.index("job big") < lead.index("job 4242")
    assert "would have saved 24.00 USD over the last 30 days" in lead  # 2 h + 10 h idle at 2.00


def test_a_cluster_under_the_line_for_a_day_alerts_once_by_email_and_webhook(
    cast, settings, hook_url, django_capture_on_commit_callbacks
):
    settings.GOVERNANCE_CLUSTER_ALERT_EMAILS = ["ops@example.org"]
    settings.GOVERNANCE_CLUSTER_ALERT_WEBHOOK_URL = hook_url
    ingest([job_record(start_time=iso(START), submit_time=iso(START)), *gpu(minutes=600, sm_util=20.0)])
    now = at("2026-11-03T19:00:00Z")

    with django_capture_on_commit_callbacks(execute=True):
        alerts = cluster_alerts_check(now=now)
        again = cluster_alerts_check(now=now)

    assert [round(a.utilisation_percent) for a in alerts] == [20] and again == []
    assert ClusterAlert.objects.count() == 1
    assert mail.outbox[0].to == ["ops@example.org"] and "20.0%" in mail.outbox[0].body
    assert Hook.received[0]["event"] == "cluster.low_utilisation"


def test_a_busy_cluster_raises_no_alert(cast):
    ingest([job_record(start_time=iso(START), submit_time=iso(START)), *gpu(minutes=600, sm_util=60.0)])

    assert cluster_alerts_check(now=at("2026-11-03T19:00:00Z")) == []
