"""A finding's life: open, acknowledged, resolved, dismissed, reopened; by people (API, pages) and by the rules."""

import pytest
import time_machine

from governance.api.models import AuditEntry
from governance.efficiency.models import Finding, FindingEvent
from governance.efficiency.services import findings_evaluate_running
from governance.notify.models import OutboxMessage
from tests.efficiency.conftest import a_job, gpu
from tests.factories import at, ingest, rate

pytestmark = pytest.mark.django_db


@pytest.fixture
def low_util(cast):
    """A running job at 10% SM: one live low_utilization finding."""
    rate(price="2.00")
    ingest([a_job(minutes=60, end_time=None, state="running"), *gpu(minutes=60, sm_util=10.0)])
    findings_evaluate_running(now=at("2026-11-03T10:00:00Z"))
    return Finding.objects.get(rule="low_utilization")


def post_state(client, finding, **body):
    return client.post(f"/api/v1/findings/{finding.pk}/state/", body, content_type="application/json")


def test_a_finding_is_resolved_and_reopened_through_the_api_with_who_and_why(client, cast, low_util, settings):
    settings.GOVERNANCE_NOTIFY_DESTINATIONS = ["https://hooks.example.org/all"]
    client.force_login(cast.alice)

    resolved = post_state(client, low_util, state="resolved", reason="batch size raised")
    reopened = post_state(client, low_util, state="open", reason="still slow")

    assert resolved.status_code == 200 and resolved.json()["state"] == "resolved"
    assert reopened.status_code == 200 and reopened.json()["state"] == "open"
    events = list(FindingEvent.objects.filter(finding=low_util).values_list("verb", "by__username", "reason"))
    assert events == [("opened", None, ""), ("resolved", "alice", "batch size raised"),
                      ("reopened", "alice", "still slow")]  # fmt: skip
    assert AuditEntry.objects.filter(action="state", object_pk=str(low_util.pk)).count() == 2
    sent = OutboxMessage.objects.filter(event__startswith="finding.").order_by("id")
    assert [m.event for m in sent] == ["finding.resolved", "finding.reopened"]  # opened came before the setting
    assert sent[0].payload["reason"] == "batch size raised" and sent[0].payload["changed_by"] == "alice"


def test_a_live_finding_cannot_be_reopened_and_a_dismissal_needs_a_reason(client, cast, low_util):
    client.force_login(cast.alice)

    assert post_state(client, low_util, state="open").status_code == 400
    assert post_state(client, low_util, state="dismissed").status_code == 400
    assert post_state(client, low_util, state="dismissed", reason="known, a profiling run").status_code == 200


def test_the_rules_resolve_a_finding_that_no_longer_fires_and_reopen_it_when_it_fires_again(cast, low_util):
    with time_machine.travel(at("2026-11-03T21:00:00Z"), tick=False):
        ingest(gpu(minutes=600, offset=60, sm_util=95.0))  # mean SM now about 87%
    low_util.refresh_from_db()
    assert low_util.state == "resolved" and low_util.waste == 0
    resolved = FindingEvent.objects.get(finding=low_util, verb="resolved")
    assert resolved.by is None and resolved.reason.startswith("no longer fires: mean SM 8")

    with time_machine.travel(at("2026-11-05T13:00:00Z"), tick=False):
        ingest(gpu(minutes=60 * 40, offset=660, sm_util=0.5))  # a long idle tail: the mean falls under 25%
        findings_evaluate_running()

    low_util.refresh_from_db()
    assert low_util.state == "open" and low_util.resolved_at is None
    assert FindingEvent.objects.filter(finding=low_util, verb="reopened", by=None).exists()
    assert Finding.objects.filter(rule="low_utilization").count() == 1


def test_a_dismissed_finding_stays_dismissed_when_it_fires_again(client, cast, low_util):
    client.force_login(cast.alice)
    post_state(client, low_util, state="dismissed", reason="a debugging session")

    findings_evaluate_running(now=at("2026-11-03T10:30:00Z"))

    low_util.refresh_from_db()
    assert low_util.state == "dismissed"
    assert Finding.objects.filter(rule="low_utilization").count() == 1


def test_the_job_page_resolves_a_finding_with_its_button(client, cast, low_util):
    client.force_login(cast.alice)
    page = client.get(f"/jobs/{low_util.job_id}/")
    assert b'value="resolved"' in page.content

    client.post(f"/findings/{low_util.pk}/state/", {"state": "resolved", "reason": "fixed"})

    low_util.refresh_from_db()
    assert low_util.state == "resolved" and low_util.state_changed_by == cast.alice
