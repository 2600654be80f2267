"""Signing in through headless Chromium against a real OpenID provider (oidc-provider, see conftest): the provider's
users through its login form, their groups mapped to roles and teams, a provider user named like the local superuser
who does not become them, and a local superuser refused through the provider who signs in with their password."""

from importlib import import_module

import jwt
import pytest
from django.conf import settings
from django.urls import reverse

from governance.api.models import AuditEntry
from governance.org.models import Membership, OidcIdentity, Team, User
from governance.org.oidc import oidc_identity_link
from tests.browser.pages import CHROMIUM

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (.ci/run installs it from Debian)"),
]


def through_the_provider(page, live_server, login: str, password: str, start: str = "/") -> None:
    """From a page of ours, the single sign-on button, then the provider's login form; back on our side."""
    page.goto(live_server.url + start)
    page.click("#sso")
    page.wait_for_selector("#login")
    page.fill("#login", login)
    page.fill("#password", password)
    page.click("#submit")


def id_token_claims(page) -> dict:
    """The claims of the ID token the provider signed, as the signed-in session of the page keeps it."""
    cookie = next(c for c in page.context.cookies() if c["name"] == settings.SESSION_COOKIE_NAME)
    session = import_module(settings.SESSION_ENGINE).SessionStore(cookie["value"])
    token = session["oidc_id_token"]
    assert jwt.get_unverified_header(token)["alg"] == "RS256"
    return jwt.decode(token, options={"verify_signature": False})


def back_home(page, live_server) -> None:
    page.wait_for_url(f"{live_server.url}/**")
    page.wait_for_load_state()


def test_a_provider_user_lands_where_they_were_going_with_the_teams_their_groups_name(
    page, live_server, cast, sso, openid_provider, settings
):
    sso()
    settings.OIDC_STORE_ID_TOKEN = True  # to look at what the provider signed
    through_the_provider(page, live_server, "carol", "not-carols-password", start="/costs/team/nlp/")
    refused = page.inner_text("#error")
    nobody = not User.objects.filter(username="carol").exists()

    page.fill("#login", "carol")
    page.fill("#password", "idp-carol-1234")
    page.click("#submit")
    back_home(page, live_server)

    assert (refused, nobody) == ("Wrong username or password.", True)
    assert page.url == f"{live_server.url}/costs/team/nlp/"
    assert page.is_visible("text=Sign out carol")
    carol = User.objects.get(username="carol")
    assert OidcIdentity.objects.get(user=carol).issuer == openid_provider.issuer == openid_provider.discovery["issuer"]
    assert (carol.email, carol.role, carol.has_usable_password()) == ("carol@idp.example", User.Role.MEMBER, False)
    assert dict(Membership.objects.filter(user=carol).values_list("team__slug", "role")) == {
        "nlp": "lead", "vision": "engineer",
    }  # fmt: skip
    assert not Team.objects.filter(slug="rogue").exists()
    # The groups came from the provider's user info endpoint: its ID token carries none of these claims.
    assert {"groups", "email", "preferred_username"}.isdisjoint(id_token_claims(page))
    made = AuditEntry.objects.filter(door=AuditEntry.Door.PAGE, where="/oidc/callback/")
    assert {(e.model, e.action) for e in made} >= {("org.user", "create"), ("org.membership", "create")}


def test_provider_groups_make_a_platform_admin_and_after_signing_out_everywhere_a_finance_user(
    page, live_server, cast, sso
):
    sso()

    through_the_provider(page, live_server, "ops", "idp-ops-1234", start="/admin/")
    back_home(page, live_server)
    admin_page = page.title()
    page.goto(live_server.url + "/")
    page.click("text=Sign out ops")
    page.click("text=Yes, sign me out")  # the provider asks before it ends its session
    page.wait_for_url(f"{live_server.url}/accounts/login/")
    # The provider asks for a login again: its session ended with ours, or ops would be signed straight back in.
    through_the_provider(page, live_server, "money", "idp-money-1234")
    back_home(page, live_server)

    assert "Site administration" in admin_page  # /admin/ sent ops to the sign-in page with its button, and back
    assert page.url.startswith(f"{live_server.url}{reverse('costs:month')}?month=")
    assert page.is_visible("text=Sign out money")
    roles = dict(User.objects.filter(username__in=["ops", "money"]).values_list("username", "role"))
    assert roles == {"ops": User.Role.ADMIN, "money": User.Role.FINANCE}


def test_a_provider_user_named_like_the_local_superuser_does_not_become_them(page, live_server, cast, sso):
    root = User.objects.create_superuser("root", email="root@here.example", password="pw-root-1234")
    sso()

    through_the_provider(page, live_server, "root", "idp-root-1234")
    back_home(page, live_server)
    page.goto(live_server.url + "/admin/")

    assert page.is_visible("text=Sign out root-2")
    assert page.url == f"{live_server.url}/accounts/login/?next=/admin/"  # not staff: asked for another account
    impostor = User.objects.get(username="root-2")
    assert not (impostor.is_superuser or impostor.is_staff or impostor.is_platform_admin)
    assert OidcIdentity.objects.get(subject="idp-0004").user == impostor
    root.refresh_from_db()
    assert (root.email, root.is_superuser, root.check_password("pw-root-1234")) == ("root@here.example", True, True)


def test_a_superuser_linked_to_a_provider_account_is_sent_back_to_their_password_which_signs_them_in(
    page, live_server, cast, sso, openid_provider
):
    root = User.objects.create_superuser("root", password="pw-root-1234")
    oidc_identity_link(user=root, issuer=openid_provider.issuer, subject="idp-0004")
    sso()

    through_the_provider(page, live_server, "root", "idp-root-1234")
    back_home(page, live_server)
    refused_at = page.url
    why = page.inner_text("#sso-refused")
    signed_out = not page.is_visible("text=Sign out")
    page.fill("#id_username", "root")
    page.fill("#id_password", "pw-root-1234")
    with page.expect_navigation():
        page.click("button[type=submit]")

    assert refused_at == f"{live_server.url}/accounts/login/?sso=refused" and signed_out
    assert "Superusers and platform admins by local role sign in here with their password" in why
    assert page.is_visible("text=Sign out root")
