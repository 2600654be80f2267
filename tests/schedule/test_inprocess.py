"""The embedded default runs the beat schedule in-process: no manual command between usage and its webhook."""

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
import time_machine

from governance.efficiency.models import Finding
from governance.schedule.apps import serving_without_broker
from governance.schedule.models import TaskRun
from governance.schedule.scheduler import InProcessScheduler
from tests.factories import at, committed, ingest, iso, job_record, rate, series

T0 = at("2026-11-03T12:00:00Z")
EVERY_15_MIN = {"efficiency.evaluate_running", "costs.check_budgets"}


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
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/hook"
    server.shutdown()


def test_one_schedule_lists_all_the_periodic_work(settings):
    tasks = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}

    assert EVERY_15_MIN | {"costs.reprice", "costs.reprice_running", "efficiency.weekly_digest",
                           "usage.maintain_partitions", "notify.deliver_due", "usage.sweep_inbox"} <= tasks  # fmt: skip


@pytest.mark.django_db
def test_a_demo_job_that_turns_idle_gets_its_finding_and_webhook_within_the_schedule(cast, settings, hook_url):
    settings.GOVERNANCE_FINDINGS_WEBHOOK_URL = hook_url
    rate(price="2.00")
    start = T0 - timedelta(hours=2)
    with time_machine.travel(T0, tick=False) as clock:
        scheduler = InProcessScheduler.from_settings()
        ingest([
            job_record(cluster="demo", job_id="demo-7", start_time=iso(start), submit_time=iso(start)),
            *series(start=start, minutes=60, every_s=300, cluster="demo", job_id="demo-7", sm_util=80.0),
            *series(start=start + timedelta(hours=1), minutes=60, every_s=300, cluster="demo", job_id="demo-7",
                    sm_util=0.0),
        ])  # fmt: skip
        with committed():
            assert scheduler.tick() == []  # as beat: each entry's first run one interval after the start
        assert not Finding.objects.exists()

        clock.shift(timedelta(minutes=15))
        with committed():
            ran = set(scheduler.tick())

    assert EVERY_15_MIN <= ran
    finding = Finding.objects.get(rule="idle_gpu", job__external_id="demo-7")
    assert finding.state == "open" and finding.waste == 2  # the idle hour at 2.00
    assert [(p["event"], p["job_id"]) for p in Hook.received if p["rule"] == "idle_gpu"] == [
        ("finding.opened", "demo-7")
    ]
    run = TaskRun.objects.get(task="efficiency.evaluate_running")
    assert run.outcome == "success" and run.runs == 1 and run.last_finished_at == T0 + timedelta(minutes=15)


def test_the_scheduler_thread_runs_only_in_the_embedded_web_process(settings):
    settings.GOVERNANCE_INPROCESS_SCHEDULER = True

    assert serving_without_broker(["manage.py", "runserver", "127.0.0.1:8000"], {"RUN_MAIN": "true"})
    assert serving_without_broker(["manage.py", "runserver", "--noreload"], {})
    assert not serving_without_broker(["manage.py", "runserver"], {})  # the autoreloader's parent
    assert not serving_without_broker(["manage.py", "migrate"], {"RUN_MAIN": "true"})
    settings.GOVERNANCE_INPROCESS_SCHEDULER = False  # a broker: celery beat runs the schedule
    assert not serving_without_broker(["manage.py", "runserver", "--noreload"], {})
