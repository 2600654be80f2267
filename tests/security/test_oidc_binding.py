"""Replay of issue 25 item 7: a provider account named `admin` signs in through the real OpenID Connect code
flow (an RS256 ID token signed by a local provider: token, JWKS and user info endpoints over HTTP) and does not
become the local superuser; it becomes a new user bound to its issuer and subject."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from io import StringIO

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.core.exceptions import SuspiciousOperation
from django.core.management import CommandError, call_command
from django.test import RequestFactory

from governance.org.models import OidcIdentity, User

pytestmark = pytest.mark.django_db
CLIENT = "gpu-governance"


class Provider(BaseHTTPRequestHandler):
    """A minimal OpenID provider: answers the token endpoint with an ID token for `claims`, the JWKS, user info."""

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    signs_with = key  # another key: a forged ID token
    issuer = ""
    claims: dict = {}

    def _json(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):  # the token endpoint
        self.rfile.read(int(self.headers["Content-Length"]))
        now = int(time.time())
        payload = {"iss": Provider.issuer, "aud": CLIENT, "iat": now, "exp": now + 300, "nonce": "n-1",
                   **Provider.claims}  # fmt: skip
        token = jwt.encode(payload, Provider.signs_with, algorithm="RS256", headers={"kid": "k1"})
        self._json({"id_token": token, "access_token": "at-1", "token_type": "Bearer"})

    def do_GET(self):
        if self.path.startswith("/jwks"):
            public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(Provider.key.public_key()))
            self._json({"keys": [{**public, "kid": "k1", "alg": "RS256", "use": "sig"}]})
        else:  # user info
            self._json(Provider.claims)

    def log_message(self, *args):
        pass


@pytest.fixture
def provider(settings):
    server = HTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    Provider.issuer, Provider.signs_with = base, Provider.key
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = CLIENT, "secret"
    settings.OIDC_OP_TOKEN_ENDPOINT, settings.OIDC_OP_USER_ENDPOINT = f"{base}/token", f"{base}/userinfo"
    settings.OIDC_OP_JWKS_ENDPOINT, settings.OIDC_RP_SIGN_ALGO = f"{base}/jwks", "RS256"
    settings.OIDC_AUTHENTICATION_CALLBACK_URL = "login"  # any named URL: the OIDC URLs are mounted only when on
    settings.OIDC_ADMIN_GROUPS = ["platform-admins"]
    yield base
    server.shutdown()


def sign_in(**claims) -> User | None:
    """The callback of the code flow, as mozilla-django-oidc runs it: code for tokens, signature, user info."""
    from governance.org.oidc import GovernanceOIDCBackend

    Provider.claims = claims
    request = RequestFactory().get("/oidc/callback/", {"code": "c-1", "state": "s-1"})
    request.session = {}
    return GovernanceOIDCBackend().authenticate(request, nonce="n-1")


def test_a_provider_account_named_admin_does_not_become_the_local_superuser(provider):
    root = User.objects.create_superuser("admin", password="pw-root-1234")

    user = sign_in(sub="idp-4711", preferred_username="admin", email="mallory@example.org")

    assert user is not None and user != root
    assert user.username == "admin-2" and not user.is_superuser and not user.is_platform_admin
    assert OidcIdentity.objects.get(issuer=provider, subject="idp-4711").user == user
    root.refresh_from_db()
    assert root.email == "" and root.is_superuser


def test_the_same_subject_signs_in_as_the_same_user_whatever_name_it_claims_next(provider):
    first = sign_in(sub="idp-1", preferred_username="carol")

    again = sign_in(sub="idp-1", preferred_username="alice")

    assert again == first and again.username == "carol"


def test_a_local_admin_linked_by_an_admin_signs_in_only_where_the_setting_allows(provider, settings):
    root = User.objects.create_superuser("admin", password="pw-root-1234")
    call_command("link_oidc_identity", "admin", issuer=provider, subject="idp-root", stdout=StringIO())

    refused = sign_in(sub="idp-root", preferred_username="admin")
    settings.OIDC_ALLOW_SUPERUSER = True
    allowed = sign_in(sub="idp-root", preferred_username="admin")

    assert refused is None and allowed == root


def test_a_platform_admin_by_local_role_is_refused_unless_the_groups_make_them_one(provider, cast):
    call_command("link_oidc_identity", "admin", issuer=provider, subject="idp-a", stdout=StringIO())

    refused = sign_in(sub="idp-a", preferred_username="admin")
    by_groups = sign_in(sub="idp-a", preferred_username="admin", groups=["platform-admins"])

    assert refused is None and by_groups == cast.admin and by_groups.is_platform_admin


def test_an_id_token_for_another_client_or_subject_is_refused(provider, settings):
    settings.OIDC_RP_CLIENT_ID = "another-client"

    assert sign_in(sub="idp-9", preferred_username="eve") is None
    assert not User.objects.filter(username="eve").exists()


def test_linking_a_subject_that_already_signs_in_as_someone_else_is_refused(provider, cast):
    sign_in(sub="idp-1", preferred_username="carol")

    with pytest.raises(CommandError, match=r"--subject: idp-1 at .* already signs in as carol"):
        call_command("link_oidc_identity", "alice", issuer=provider, subject="idp-1", stdout=StringIO())


def test_an_id_token_not_signed_by_the_providers_key_signs_nobody_in(provider):
    User.objects.create_superuser("admin", password="pw-root-1234")
    Provider.signs_with = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    with pytest.raises(SuspiciousOperation):
        sign_in(sub="idp-4711", preferred_username="admin")

    assert not OidcIdentity.objects.exists()
