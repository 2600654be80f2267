import pytest

from governance.api.models import AuditEntry

pytestmark = pytest.mark.django_db


def test_a_write_is_recorded_with_who_what_and_the_changes(client, cast):
    client.force_login(cast.admin)

    client.patch(f"/api/v1/teams/{cast.nlp.pk}/", {"name": "Language"}, content_type="application/json")

    entry = AuditEntry.objects.get()
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

    entry = AuditEntry.objects.get()
    assert entry.action == "delete" and entry.object_pk == str(membership.pk)
    assert entry.changes["role"] == ["engineer", None]


def test_a_refused_write_and_a_read_record_nothing(client, cast):
    client.force_login(cast.nlp_lead)

    client.patch(f"/api/v1/teams/{cast.nlp.pk}/", {"name": "Mine"}, content_type="application/json")
    client.get("/api/v1/teams/")

    assert AuditEntry.objects.count() == 0


def test_a_write_that_fails_validation_records_nothing(client, cast):
    client.force_login(cast.admin)

    response = client.post(
        "/api/v1/projects/", {"slug": "x", "name": "X", "team": "nope"}, content_type="application/json"
    )

    assert response.status_code == 400 and "team" in response.json()["error"]["details"]
    assert AuditEntry.objects.count() == 0


def test_admins_read_the_audit_log_filtered_by_model(client, cast):
    client.force_login(cast.admin)
    client.post("/api/v1/teams/", {"slug": "audio", "name": "Audio"}, content_type="application/json")
    client.post("/api/v1/tokens/", {"name": "ci", "scope": "read"}, content_type="application/json")

    teams = client.get("/api/v1/audit/", {"model": "org.team"}).json()["results"]
    tokens = client.get("/api/v1/audit/", {"model": "api.apitoken"}).json()["results"]

    assert [(e["action"], e["object_repr"], e["actor_name"]) for e in teams] == [("create", "Audio", "admin")]
    assert "key_hash" not in tokens[0]["changes"] and tokens[0]["changes"]["name"] == [None, "ci"]


def test_the_audit_log_is_in_the_admin_site_read_only(client, cast):
    cast.admin.is_superuser = True
    cast.admin.save()
    client.force_login(cast.admin)
    client.post("/api/v1/teams/", {"slug": "audio", "name": "Audio"}, content_type="application/json")

    listing = client.get("/admin/api/auditentry/")
    adding = client.get("/admin/api/auditentry/add/")

    assert listing.status_code == 200 and b"Audio" in listing.content
    assert adding.status_code == 403
