"""Replays of issue 15 (sign-in): wrong passwords lock a username at an address, bearer guesses are throttled
wherever the header says they come from, and single sign-on maps the provider's claims to roles and teams."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.cache import cache

from governance.org.models import Membership, Team, User
from governance.org.oidc import oidc_identity_link, oidc_user_sign_in
from tests.api.conftest import bearer

pytestmark = pytest.mark.django_db
LOGIN = "/accounts/login/"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


def sign_in(client, password: str, username: str = "alice", addr: str = "10.0.0.1"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=addr)


def test_ten_wrong_passwords_lock_the_user_at_that_address_and_the_right_one_no_longer_works(client, cast):
    wrong = [sign_in(client, f"guess-{i}").status_code for i in range(10)]

    right = sign_in(client, "pw-alice-1234")

    assert wrong[:9] == [200] * 9  # the form again, with its error
    assert wrong[9] == 429
    assert right.status_code == 429 and "Too many failed sign-ins" in right.content.decode()
    assert "_auth_user_id" not in client.session


def test_a_locked_user_still_signs_in_from_another_address(client, cast):
    for i in range(10):
        sign_in(client, f"guess-{i}")

    response = sign_in(client, "pw-alice-1234", addr="10.0.0.2")

    assert response.status_code == 302 and client.session["_auth_user_id"] == str(cast.alice.pk)


def test_a_forwarded_for_header_does_not_make_one_client_many(client, cast):
    for i in range(10):
        client.post(LOGIN, {"username": "alice", "password": f"g{i}"}, REMOTE_ADDR="10.0.0.1",
                    HTTP_X_FORWARDED_FOR=f"192.0.2.{i}")  # fmt: skip

    response = client.post(
        LOGIN, {"username": "alice", "password": "pw-alice-1234"}, REMOTE_ADDR="10.0.0.1",
        HTTP_X_FORWARDED_FOR="192.0.2.200",
    )  # fmt: skip

    assert response.status_code == 429


def test_a_right_password_before_the_limit_resets_the_count(client, cast):
    for i in range(9):
        sign_in(client, f"guess-{i}")
    assert sign_in(client, "pw-alice-1234").status_code == 302
    client.logout()

    for i in range(9):
        sign_in(client, f"again-{i}")

    assert sign_in(client, "pw-alice-1234").status_code == 302


def test_bearer_guesses_with_a_new_forwarded_for_each_time_are_still_throttled(client, cast, settings, one_window):
    settings.API_TOKEN_FAILURES_PER_MINUTE = 3

    statuses = [
        client.get("/api/v1/teams/", HTTP_X_FORWARDED_FOR=f"192.0.2.{i}", **bearer(f"ggt_{i}")).status_code
        for i in range(5)
    ]

    assert statuses == [401, 401, 401, 429, 429]


# --- Single sign-on ---------------------------------------------------------------------------------------


@pytest.fixture
def oidc(settings):
    settings.OIDC_RP_CLIENT_ID = "gpu-governance"
    settings.OIDC_RP_CLIENT_SECRET = "secret"
    settings.OIDC_OP_TOKEN_ENDPOINT = "https://idp.example/token"
    settings.OIDC_OP_USER_ENDPOINT = "https://idp.example/userinfo"
    settings.OIDC_OP_JWKS_ENDPOINT = "https://idp.example/jwks"
    settings.OIDC_RP_SIGN_ALGO = "RS256"
    settings.OIDC_ADMIN_GROUPS = ["platform-admins"]
    settings.OIDC_FINANCE_GROUPS = ["finance"]
    from governance.org.oidc import GovernanceOIDCBackend

    return GovernanceOIDCBackend()


ISSUER = "https://idp.example"


def claims(username: str, *groups: str) -> dict:
    return {"sub": f"id-{username}", "preferred_username": username, "email": f"{username}@example.org",
            "groups": list(groups)}  # fmt: skip


def sso(found: dict) -> User | None:
    return oidc_user_sign_in(issuer=ISSUER, subject=found["sub"], claims=found)


def test_a_new_sso_user_gets_the_teams_and_roles_their_groups_name(oidc, cast):
    user = sso(claims("carol", "gg-team:nlp:lead", "gg-team:vision:engineer", "staff"))

    assert user.role == User.Role.MEMBER and not user.has_usable_password()
    assert dict(Membership.objects.filter(user=user).values_list("team__slug", "role")) == {
        "nlp": "lead", "vision": "engineer",
    }  # fmt: skip


def test_an_sso_group_naming_an_unknown_team_creates_no_team(oidc, cast):
    user = sso(claims("carol", "gg-team:rogue:lead", "gg-team:nlp:boss"))

    assert not Team.objects.filter(slug="rogue").exists()
    assert not Membership.objects.filter(user=user).exists()


def test_the_admin_and_finance_groups_give_those_roles(oidc, cast):
    admin = sso(claims("root", "platform-admins", "finance"))
    money = sso(claims("money", "finance"))

    assert (admin.role, admin.is_staff, admin.is_platform_admin) == (User.Role.ADMIN, True, True)
    assert (money.role, money.is_staff, money.sees_all_costs) == (User.Role.FINANCE, False, True)


def test_the_next_sign_in_follows_the_providers_groups(oidc, cast):
    first = sso(claims("carol", "platform-admins", "gg-team:nlp:lead", "gg-team:vision:engineer"))

    user = sso(claims("carol", "gg-team:vision:lead"))

    assert user == first
    assert user.role == User.Role.MEMBER and not user.is_staff
    assert dict(Membership.objects.filter(user=user).values_list("team__slug", "role")) == {"vision": "lead"}


def test_an_sso_user_is_never_matched_to_a_local_account_by_username_and_must_carry_a_subject(oidc, cast):
    user = sso(claims("alice"))

    assert user != cast.alice and user.username == "alice-2"
    assert oidc.verify_claims({"email": "x@example.org", "preferred_username": "x"}) is False


def test_a_linked_superuser_keeps_their_powers_only_where_the_setting_allows_superusers(oidc, cast, settings):
    root = User.objects.create_superuser("root", password="x")
    oidc_identity_link(user=root, issuer=ISSUER, subject="id-root")

    refused = sso(claims("root"))
    settings.OIDC_ALLOW_SUPERUSER = True
    allowed = sso(claims("root"))

    assert refused is None and allowed == root
    root.refresh_from_db()
    assert root.is_superuser and root.is_platform_admin


# --- Settings ------------------------------------------------------------------------------------------------


def _settings_say(code: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OIDC_", "CACHE_URL", "REDIS_URL"))}
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); from django.conf import settings; print({code})"],
        cwd=ROOT, env={**clean, "DJANGO_SETTINGS_MODULE": "governance.settings", **env},
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_throttle_counters_go_to_redis_when_a_cache_url_is_set():
    result = _settings_say('settings.CACHES["default"]["BACKEND"]', CACHE_URL="redis://127.0.0.1:6379/9")

    assert result.stdout.strip() == "django.core.cache.backends.redis.RedisCache", result.stderr


def test_a_cache_url_that_is_not_redis_is_a_loud_error():
    result = _settings_say("1", CACHE_URL="memcached://x")

    assert result.returncode != 0 and "is not a Redis URL" in result.stderr


def test_sso_needs_its_endpoints_once_a_client_id_is_set():
    result = _settings_say("1", OIDC_RP_CLIENT_ID="gg")

    assert result.returncode != 0 and "OIDC_RP_CLIENT_SECRET must be set" in result.stderr


def test_sso_on_puts_its_backend_after_the_lockout_and_a_button_on_the_login_page():
    env = {"OIDC_RP_CLIENT_ID": "gg", "OIDC_RP_CLIENT_SECRET": "s", "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://i/a",
           "OIDC_OP_TOKEN_ENDPOINT": "https://i/t", "OIDC_OP_USER_ENDPOINT": "https://i/u",
           "OIDC_OP_JWKS_ENDPOINT": "https://i/j"}  # fmt: skip
    code = (
        "settings.AUTHENTICATION_BACKENDS, "
        "__import__('django.test', fromlist=['Client']).Client().get('/accounts/login/').content.decode()"
    )

    result = _settings_say(code, **env)

    assert result.returncode == 0, result.stderr
    assert "'axes.backends.AxesStandaloneBackend', 'django.contrib.auth.backends.ModelBackend', " in result.stdout
    assert "'governance.org.oidc.GovernanceOIDCBackend'" in result.stdout
    assert "/oidc/authenticate/" in result.stdout and "Sign in with single sign-on" in result.stdout
