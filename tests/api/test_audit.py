import pytest

from governance.api.models import AuditEntry
from governance.efficiency.models import Finding
from governance.efficiency.services import findings_evaluate_all
from tests.factories import at, ingest, job_record, series

pytestmark = pytest.mark.django_db


def test_a_write_is_recorded_with_who_what_and_the_changes(client, cast):
    client.force_login(cast.admin)

    client.patch(f"/api/v1/teams/{cast.nlp.pk}/", {"name": "Language"}, content_type="application/json")

    entry = AuditEntry.objects.get(door="api")
    assert (entry.actor, entry.action, entry.model, entry.object_pk) == (
        cast.admin,
        "update",
        "org.team",
        str(cast.nlp.pk),
    )
    assert entry.changes == {"name": ["NLP", "Language"]}


def test_a_delete_is_recorded_with_what_was_there(client, cast):
    client.force_login(cast.admin)
    membership = cast.alice.memberships.get()

    client.delete(f"/api/v1/memberships/{membership.pk}/")

    entry = AuditEntry.objects.get(door="api")
    assert entry.action == "delete" and entry.object_pk == str(membership.pk)
    assert entry.changes["role"] == ["engineer", None]


def test_a_refused_write_and_a_read_record_nothing(client, cast):
    client.force_login(cast.nlp_lead)

    client.patch(f"/api/v1/teams/{cast.nlp.pk}/", {"name": "Mine"}, content_type="application/json")
    client.get("/api/v1/teams/")

    assert not AuditEntry.objects.filter(door="api").exists()


def test_a_write_that_fails_validation_records_nothing(client, cast):
    client.force_login(cast.admin)

    response = client.post(
        "/api/v1/projects/", {"slug": "x", "name": "X", "team": "nope"}, content_type="application/json"
    )

    assert response.status_code == 400 and "team" in response.json()["error"]["details"]
    assert not AuditEntry.objects.filter(door="api").exists()


def test_admins_read_the_audit_log_filtered_by_model(client, cast):
    client.force_login(cast.admin)
    client.post("/api/v1/teams/", {"slug": "audio", "name": "Audio"}, content_type="application/json")
    client.post("/api/v1/tokens/", {"name": "ci", "scope": "read"}, content_type="application/json")

    teams = client.get("/api/v1/audit/", {"model": "org.team"}).json()["results"]
    tokens = client.get("/api/v1/audit/", {"model": "api.apitoken"}).json()["results"]

    assert [(e["action"], e["object_repr"], e["actor_name"], e["door"]) for e in teams if e["door"] == "api"] == [
        ("create", "Audio", "admin", "api")
    ]
    assert "key_hash" not in tokens[0]["changes"] and tokens[0]["door"] == "api"
    assert tokens[0]["changes"]["name"] == [None, "ci"]


def test_the_audit_log_is_in_the_admin_site_read_only(client, cast):
    cast.admin.is_superuser = True
    cast.admin.save()
    client.force_login(cast.admin)
    client.post("/api/v1/teams/", {"slug": "audio", "name": "Audio"}, content_type="application/json")

    listing = client.get("/admin/api/auditentry/")
    adding = client.get("/admin/api/auditentry/add/")

    assert listing.status_code == 200 and b"Audio" in listing.content
    assert adding.status_code == 403


def test_a_rate_card_added_through_the_api_is_recorded(client, cast):
    client.force_login(cast.admin)
    body = {"gpu_model": "NVIDIA H100 80GB HBM3", "price_per_gpu_hour": "2.50", "valid_from": "2027-01-01T00:00:00Z"}

    response = client.post("/api/v1/rates/", data=body, content_type="application/json")

    assert response.status_code == 201, response.content
    entry = AuditEntry.objects.get(model="costs.ratecard")
    assert (entry.actor, entry.action) == (cast.admin, "create")


def test_a_refused_rate_card_records_nothing(client, cast):
    client.force_login(cast.admin)
    body = {"gpu_model": "NVIDIA H100 80GB HBM3", "price_per_gpu_hour": "2.50", "currency": "usd"}

    assert client.post("/api/v1/rates/", data=body, content_type="application/json").status_code == 400
    assert not AuditEntry.objects.filter(model="costs.ratecard").exists()


def test_a_finding_acknowledged_through_the_api_is_recorded(client, cast):
    ingest([
        job_record(job_id="9", end_time="2026-11-03T13:12:00Z", state="completed"),
        *series(start=at("2026-11-03T09:12:00Z"), minutes=240, job_id="9", sm_util=0.0),
    ])  # fmt: skip
    findings_evaluate_all(now=at("2026-11-04T00:00:00Z"))
    finding = Finding.objects.filter(job__external_id="9").first()
    assert finding is not None
    client.force_login(cast.nlp_lead)

    response = client.post(
        f"/api/v1/findings/{finding.pk}/state/", data={"state": "acknowledged"}, content_type="application/json"
    )

    assert response.status_code == 200, response.content
    entry = AuditEntry.objects.get(model="efficiency.finding")
    assert (entry.actor, entry.action, entry.object_pk) == (cast.nlp_lead, "state", str(finding.pk))
