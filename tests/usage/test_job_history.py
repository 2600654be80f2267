"""A job changed after it was billed keeps its history: on the job page, in the API, in the audit log, and the
leads of both teams whose bill moves are told."""

import pytest
from django.urls import reverse

from governance.api.models import AuditEntry
from governance.notify.models import OutboxMessage
from governance.org.models import ProjectMapping
from governance.usage.models import Job, JobChange
from governance.usage.remap import jobs_remap
from tests.factories import at, batch_body, committed, ingest, job_record, priced, rate, series
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db

FINISHED = {"end_time": "2026-11-03T13:12:00Z", "state": "completed"}


@pytest.fixture
def billed_job(cast):
    """Job c1/4242 of llm-pretrain (NLP): four hours on one GPU, finished and priced."""
    for lead, email in ((cast.nlp_lead, "nlp-lead@example.org"), (cast.vision_lead, "vision-lead@example.org")):
        lead.email = email
        lead.save()
    rate()
    ingest([job_record(**FINISHED), *series(start=at("2026-11-03T09:12:00Z"), minutes=240, every_s=600)])
    priced()
    return Job.objects.get(external_id="4242")


def _post(client, token: str, records: list) -> None:
    with committed():
        response = client.post("/api/v1/ingest/", data=batch_body(records), content_type="application/json",
                               HTTP_AUTHORIZATION=f"Bearer {token}")  # fmt: skip
    assert response.status_code == 202, response.content


def test_it_keeps_the_history_of_a_finished_job_moved_and_shortened_by_a_later_record(
    client, cast, ingest_token, billed_job
):
    _post(client, ingest_token, [job_record(project="detector", end_time="2026-11-03T10:12:00Z", state="completed")])
    priced()

    changes = {c.field: (c.old_value, c.new_value, c.door, c.token_name) for c in JobChange.objects.all()}
    assert changes == {
        "project": ("llm-pretrain", "detector", "ingest", "collector"),
        "team": ("nlp", "vision", "ingest", "collector"),
        "end_time": ("2026-11-03T13:12:00Z", "2026-11-03T10:12:00Z", "ingest", "collector"),
    }
    assert_billing_invariants()


def test_the_job_page_and_the_api_show_the_history(client, cast, ingest_token, billed_job):
    _post(client, ingest_token, [job_record(project="detector", end_time="2026-11-03T10:12:00Z", state="completed")])
    client.force_login(cast.admin)

    page = client.get(reverse("efficiency:job", args=[billed_job.pk])).content.decode()
    history = client.get(f"/api/v1/jobs/{billed_job.pk}/history/").json()

    assert 'id="job-history"' in page and "detector" in page and "token collector" in page
    assert {(h["field"], h["old_value"], h["new_value"], h["token_name"]) for h in history} >= {
        ("project", "llm-pretrain", "detector", "collector"),
        ("end_time", "2026-11-03T13:12:00Z", "2026-11-03T10:12:00Z", "collector"),
    }


def test_the_change_is_in_the_audit_log_naming_the_token(client, cast, ingest_token, billed_job):
    _post(client, ingest_token, [job_record(project="detector", end_time="2026-11-03T10:12:00Z", state="completed")])

    entry = AuditEntry.objects.get(model="usage.job", object_pk=str(billed_job.pk))
    assert (entry.door, entry.token_name, entry.actor_name, entry.object_repr) == ("ingest", "collector", "admin",
                                                                                  "c1/4242")  # fmt: skip
    assert entry.changes["project"] == ["llm-pretrain", "detector"] and entry.where.startswith("batch ")


def test_the_leads_of_both_teams_are_told_with_the_job_the_change_and_the_month(client, cast, ingest_token, billed_job):
    _post(client, ingest_token, [job_record(project="detector", end_time="2026-11-03T10:12:00Z", state="completed")])

    told = {m.destination: m for m in OutboxMessage.objects.filter(event="job.changed")}
    assert set(told) == {"email:nlp-lead@example.org", "email:vision-lead@example.org"}
    message = told["email:nlp-lead@example.org"]
    assert message.payload["job"] == "c1/4242" and message.payload["month"] == "2026-11"
    assert message.payload["changes"]["team"] == ["nlp", "vision"] and "NLP and Vision" in message.text


def test_a_running_job_repeating_its_record_writes_no_history(client, cast, ingest_token):
    rate()
    _post(client, ingest_token, [job_record()])
    _post(client, ingest_token, [job_record()])

    assert not JobChange.objects.exists() and not OutboxMessage.objects.filter(event="job.changed").exists()


def test_a_job_first_described_before_it_started_has_no_history(client, cast, ingest_token):
    _post(client, ingest_token, [job_record(start_time=None, state="pending")])
    _post(client, ingest_token, [job_record()])

    assert not JobChange.objects.exists()


def test_a_remap_moving_a_finished_job_is_on_record_and_told(cast, billed_job):
    ProjectMapping.objects.create(value="llm-pretrain", project=cast.vision.projects.get())

    assert jobs_remap(accounts=["llm-pretrain"]) == 1

    change = JobChange.objects.get(field="team")
    assert (change.old_value, change.new_value) == ("nlp", "vision")
    assert OutboxMessage.objects.filter(event="job.changed").count() == 2
    priced()
    assert_billing_invariants()


def test_a_remap_run_by_the_worker_is_on_record_through_the_task_door(cast, billed_job):
    from governance.usage.tasks import remap_jobs

    ProjectMapping.objects.create(value="llm-pretrain", project=cast.vision.projects.get())

    remap_jobs.apply(args=[["llm-pretrain"]])

    change = JobChange.objects.get(field="project")
    entry = AuditEntry.objects.get(model="usage.job", object_pk=str(billed_job.pk))
    assert (change.door, change.actor_name) == ("task", "task usage.remap_jobs")
    assert (entry.door, entry.where, entry.changes["team"]) == ("task", "usage.remap_jobs", ["nlp", "vision"])


def test_a_job_ending_as_usual_writes_no_history_but_a_changed_end_does(client, cast, ingest_token):
    rate()
    _post(client, ingest_token, [job_record()])
    _post(client, ingest_token, [job_record(**FINISHED)])
    assert not JobChange.objects.exists()

    _post(client, ingest_token, [job_record(end_time="2026-11-03T09:13:00Z", state="failed")])

    assert {(c.field, c.old_value, c.new_value) for c in JobChange.objects.all()} == {
        ("end_time", "2026-11-03T13:12:00Z", "2026-11-03T09:13:00Z"),
        ("state", "completed", "failed"),
    }
