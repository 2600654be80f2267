import pytest
from django.utils import timezone

from governance.api.models import ApiToken, AuditEntry
from governance.api.services import api_token_create
from tests.api.conftest import bearer
from tests.api.test_permission_matrix import ROWS

pytestmark = pytest.mark.django_db

READ_ROWS = [row for row in ROWS if row.method == "get" and row.route.startswith("v1:") and row.route != "v1:root"]


def test_a_new_token_is_shown_once_and_stored_only_as_a_hash(client, cast):
    client.force_login(cast.alice)

    created = client.post("/api/v1/tokens/", {"name": "notebook", "scope": "read"}, content_type="application/json")
    listed = client.get("/api/v1/tokens/")

    raw = created.json()["token"]
    assert created.status_code == 201 and raw.startswith("ggt_")
    assert raw not in listed.content.decode()
    assert "token" not in listed.json()["results"][0]
    assert ApiToken.objects.get(name="notebook").key_hash != raw
    assert client.get("/api/v1/teams/", **bearer(raw)).status_code == 200


def test_a_second_token_of_the_same_name_is_refused_naming_the_field(client, cast):
    client.force_login(cast.alice)
    client.post("/api/v1/tokens/", {"name": "ci", "scope": "read"}, content_type="application/json")

    again = client.post("/api/v1/tokens/", {"name": "ci", "scope": "write"}, content_type="application/json")

    assert again.status_code == 400
    assert again.json()["error"]["details"] == {"name": ["You already have a token with this name."]}
    assert ApiToken.objects.filter(user=cast.alice).count() == 1


def test_only_platform_admins_may_hold_an_admin_scoped_token(client, cast):
    client.force_login(cast.nlp_lead)

    response = client.post("/api/v1/tokens/", {"name": "root", "scope": "admin"}, content_type="application/json")

    assert response.status_code == 400 and "scope" in response.json()["error"]["details"]


def test_a_read_or_write_token_cannot_mint_new_tokens(client, cast):
    _, raw = api_token_create(user=cast.admin, name="writer", scope="write")

    response = client.post(
        "/api/v1/tokens/", {"name": "more", "scope": "admin"}, content_type="application/json", **bearer(raw)
    )

    assert response.status_code == 403
    assert ApiToken.objects.count() == 1


def test_a_revoked_token_is_refused(client, world):
    _, raw = api_token_create(user=world.cast.nlp_lead, name="cron", scope="read")
    client.force_login(world.cast.nlp_lead)
    token = ApiToken.objects.get(name="cron")
    assert client.get("/api/v1/jobs/", **bearer(raw)).status_code == 200

    revoked = client.delete(f"/api/v1/tokens/{token.pk}/")
    client.logout()

    assert revoked.status_code == 204
    response = client.get("/api/v1/jobs/", **bearer(raw))
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Invalid, expired or revoked API token."
    assert AuditEntry.objects.filter(action="revoke", object_pk=str(token.pk), actor_name="nlp-lead").exists()


def test_the_token_records_when_it_was_last_used(client, cast):
    token, raw = api_token_create(user=cast.finance, name="report", scope="read")

    client.get("/api/v1/teams/", **bearer(raw))

    token.refresh_from_db()
    assert token.last_used_at is not None and (timezone.now() - token.last_used_at).total_seconds() < 60


@pytest.mark.parametrize("row", READ_ROWS, ids=[row.id for row in READ_ROWS])
def test_an_ingest_token_is_refused_on_every_read_endpoint(client, world, row):
    _, raw = api_token_create(user=world.cast.admin, name="collector", scope="ingest")

    response = client.get(row.url(world), **bearer(raw))

    assert response.status_code == 403, row.url(world)
    assert response.json()["error"]["code"] == "permission_denied"


def test_a_read_token_cannot_write(client, cast):
    _, raw = api_token_create(user=cast.admin, name="reader", scope="read")

    response = client.post(
        "/api/v1/teams/", {"slug": "audio", "name": "Audio"}, content_type="application/json", **bearer(raw)
    )

    assert response.status_code == 403


def test_a_write_token_writes_only_what_its_owners_role_allows(client, cast):
    _, lead_raw = api_token_create(user=cast.nlp_lead, name="lead-writer", scope="write")
    _, admin_raw = api_token_create(user=cast.admin, name="admin-writer", scope="write")
    body = {"slug": "audio", "name": "Audio"}

    refused = client.post("/api/v1/teams/", body, content_type="application/json", **bearer(lead_raw))
    accepted = client.post("/api/v1/teams/", body, content_type="application/json", **bearer(admin_raw))

    assert (refused.status_code, accepted.status_code) == (403, 201)
    entry = AuditEntry.objects.get(model="org.team", action="create", door="api")
    assert (entry.actor_name, entry.token.name, entry.token_name) == ("admin", "admin-writer", "admin-writer")
