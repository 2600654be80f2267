"""Replays of issue 15 (tokens): who may mint which scope, how long a token lives, and guessing them."""

from datetime import timedelta
from io import StringIO

import pytest
import time_machine
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.utils import timezone

from governance.api.models import ApiToken
from governance.api.services import api_token_create
from tests.api.conftest import bearer

pytestmark = pytest.mark.django_db
TOKENS = "/api/v1/tokens/"


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


def mint(client, user, **body):
    client.force_login(user)
    return client.post(TOKENS, {"name": "t", **body}, content_type="application/json")


@pytest.mark.parametrize("role", ["finance", "nlp_lead", "alice"])
@pytest.mark.parametrize("scope", ["ingest", "admin"])
def test_only_a_platform_admin_may_mint_an_ingest_or_admin_token(client, cast, role, scope):
    response = mint(client, getattr(cast, role), scope=scope)

    assert response.status_code == 400
    assert "platform admins" in response.json()["error"]["details"]["scope"][0]
    assert not ApiToken.objects.exists()


def test_an_admin_mints_an_ingest_token_that_ingests(client, cast):
    response = mint(client, cast.admin, scope="ingest")

    assert response.status_code == 201
    client.logout()
    ingest = client.post("/api/v1/ingest/", b"{}", content_type="application/json", **bearer(response.json()["token"]))
    assert ingest.status_code == 400  # past authentication and the ingest scope: the empty batch itself is refused
    assert ApiToken.objects.get().scope == "ingest"


@pytest.mark.parametrize("scope", ["ingest", "admin"])
def test_the_command_refuses_ingest_and_admin_tokens_for_a_non_admin(cast, scope):
    with pytest.raises(CommandError, match="platform admins"):
        call_command("create_api_token", "alice", "--scope", scope, "--name", "x", stdout=StringIO())

    assert not ApiToken.objects.exists()


def test_the_command_issues_an_ingest_token_to_an_admin_with_the_default_lifetime(cast, settings):
    out = StringIO()

    call_command("create_api_token", "admin", "--scope", "ingest", "--name", "node-agent", stdout=out)

    token = ApiToken.objects.get()
    assert out.getvalue().startswith("ggt_")
    expected = timezone.now() + timedelta(days=settings.API_TOKEN_DEFAULT_DAYS)
    assert abs((token.expires_at - expected).total_seconds()) < 60


def test_the_command_refuses_a_lifetime_past_the_maximum(cast, settings):
    with pytest.raises(CommandError, match="at most"):
        call_command(
            "create_api_token", "alice", "--scope", "read", "--name", "x", "--days", "10000", stdout=StringIO()
        )


def test_a_new_token_gets_the_default_lifetime_and_shows_it(client, cast, settings):
    settings.API_TOKEN_DEFAULT_DAYS = 30

    response = mint(client, cast.alice, scope="read")

    expires = ApiToken.objects.get().expires_at
    assert abs((expires - (timezone.now() + timedelta(days=30))).total_seconds()) < 60
    assert response.json()["expires_at"]


def test_an_expiry_past_the_maximum_is_refused_naming_the_field(client, cast, settings):
    settings.API_TOKEN_MAX_DAYS = 60
    too_far = (timezone.now() + timedelta(days=61)).isoformat()

    response = mint(client, cast.alice, scope="read", expires_at=too_far)

    assert response.status_code == 400
    assert "at most 60 days" in response.json()["error"]["details"]["expires_at"][0]


def test_an_expiry_in_the_past_is_refused(client, cast):
    response = mint(client, cast.alice, scope="read", expires_at="2020-01-01T00:00:00Z")

    assert response.status_code == 400 and "expires_at" in response.json()["error"]["details"]


def test_a_shorter_expiry_is_kept(client, cast):
    soon = timezone.now() + timedelta(days=3)

    response = mint(client, cast.alice, scope="read", expires_at=soon.isoformat())

    assert response.status_code == 201
    assert abs((ApiToken.objects.get().expires_at - soon).total_seconds()) < 1


def test_an_expired_token_authenticates_as_invalid(client, cast):
    _, raw = api_token_create(
        user=cast.alice, name="short", scope="read", expires_at=timezone.now() + timedelta(days=1)
    )
    assert client.get("/api/v1/teams/", **bearer(raw)).status_code == 200

    with time_machine.travel(timezone.now() + timedelta(days=1, seconds=1)):
        response = client.get("/api/v1/teams/", **bearer(raw))

    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Invalid, expired or revoked API token."


def test_the_owner_lists_their_tokens_with_last_use_and_expiry_and_revokes_one(client, cast):
    token, raw = api_token_create(user=cast.alice, name="laptop", scope="read")
    api_token_create(user=cast.nlp_lead, name="lead-ci", scope="read")
    client.get("/api/v1/teams/", **bearer(raw))
    client.force_login(cast.alice)

    listed = client.get(TOKENS).json()["results"]
    revoked = client.delete(f"{TOKENS}{token.pk}/")

    assert [t["name"] for t in listed] == ["laptop"]
    assert listed[0]["last_used_at"] and listed[0]["expires_at"]
    assert revoked.status_code == 204
    assert client.get(f"{TOKENS}?active=true").json()["results"] == []
    client.logout()
    assert client.get("/api/v1/teams/", **bearer(raw)).status_code == 401


def test_an_owner_cannot_see_or_revoke_another_users_token(client, cast):
    other, _ = api_token_create(user=cast.nlp_lead, name="lead-ci", scope="read")
    client.force_login(cast.alice)

    assert client.get(f"{TOKENS}{other.pk}/").status_code == 404
    assert client.delete(f"{TOKENS}{other.pk}/").status_code == 404
    other.refresh_from_db()
    assert other.revoked_at is None


def test_invalid_bearer_tokens_from_one_address_are_answered_429_after_the_limit(client, cast, settings, one_window):
    settings.API_TOKEN_FAILURES_PER_MINUTE = 5
    _, good = api_token_create(user=cast.alice, name="good", scope="read")

    statuses = [client.get("/api/v1/teams/", **bearer(f"ggt_guess{i}")).status_code for i in range(8)]
    elsewhere = client.get("/api/v1/teams/", REMOTE_ADDR="10.9.9.9", **bearer("ggt_guess-other"))

    assert statuses == [401] * 5 + [429] * 3
    assert client.get("/api/v1/teams/", **bearer(good)).status_code == 200  # the holder of a good token is not punished
    assert elsewhere.status_code == 401


def test_the_admin_issues_an_ingest_token_only_to_a_platform_admin(client, cast):
    client.force_login(cast.admin)
    form = {"name": "collector", "scope": "ingest", "expires_at_0": "", "expires_at_1": ""}

    refused = client.post("/admin/api/apitoken/add/", {**form, "user": cast.alice.pk})
    issued = client.post("/admin/api/apitoken/add/", {**form, "user": cast.admin.pk}, follow=True)

    assert refused.status_code == 200 and "Only platform admins may issue ingest tokens." in refused.content.decode()
    token = ApiToken.objects.get()
    assert (token.user, token.scope) == (cast.admin, "ingest")
    assert "ggt_" in issued.content.decode() and token.expires_at > timezone.now()


def test_a_staff_user_who_is_not_a_platform_admin_cannot_issue_tokens_in_the_admin(client, cast):
    cast.finance.is_staff = True
    cast.finance.save()
    client.force_login(cast.finance)

    response = client.post("/admin/api/apitoken/add/", {"user": cast.finance.pk, "name": "x", "scope": "read"})

    assert response.status_code == 403
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("scope", ["ingest", "admin"])
def test_an_ingest_or_admin_token_stops_working_when_its_holder_stops_being_an_admin(client, cast, scope):
    _, raw = api_token_create(user=cast.admin, name="ops", scope=scope)
    cast.admin.role = "member"
    cast.admin.save()

    response = client.post("/api/v1/ingest/", b"{}", content_type="application/json", **bearer(raw))

    assert response.status_code == 401


def test_a_job_naming_a_team_whose_name_another_team_holds_is_stored_unattributed(cast):
    from governance.org.models import Team
    from governance.usage.models import Job
    from tests.factories import ingest, job_record

    Team.objects.create(slug="cv", name="Computer Vision")

    ingest([job_record(job_id="77", project="new-proj", team="Computer Vision")])  # would be team "computer-vision"

    job = Job.objects.get(external_id="77")
    assert job.project is None
    assert not Team.objects.filter(slug="computer-vision").exists()
