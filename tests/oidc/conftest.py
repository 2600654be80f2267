"""A real OpenID provider (panva's `oidc-provider` on node, tests/oidc/provider/), started once per test run on a
free port with the provider's own users, and the app's single sign-on pointed at it as an operator would: the
endpoints from the provider's discovery document, RS256, the client registered there. Stopped by its PID."""

from __future__ import annotations

import copy
import importlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from django.conf import settings
from django.urls import clear_url_caches

from tests.processes import stop_by_pid

BACKENDS = list(settings.AUTHENTICATION_BACKENDS)
PROVIDER = Path(__file__).resolve().parent / "provider"
CLIENT_ID, CLIENT_SECRET = "gpu-governance", "client-secret-for-the-tests-1234"
# The provider's people: what they type at its login form, and the claims it vouches for.
PROVIDER_USERS = [
    {"login": "carol", "password": "idp-carol-1234", "sub": "idp-0001",
     "claims": {"preferred_username": "carol", "email": "carol@idp.example", "email_verified": True,
                "groups": ["staff", "gg-team:nlp:lead", "gg-team:vision:engineer", "gg-team:rogue:lead"]}},
    {"login": "ops", "password": "idp-ops-1234", "sub": "idp-0002",
     "claims": {"preferred_username": "ops", "email": "ops@idp.example", "groups": ["platform-admins"]}},
    {"login": "money", "password": "idp-money-1234", "sub": "idp-0003",
     "claims": {"preferred_username": "money", "email": "money@idp.example", "groups": ["finance"]}},
    # Named like the local superuser of the tests, with no groups at all.
    {"login": "root", "password": "idp-root-1234", "sub": "idp-0004",
     "claims": {"preferred_username": "root", "email": "mallory@idp.example", "groups": []}},
]  # fmt: skip


def node_and_npm() -> tuple[str, str]:
    """node and npm; the tests skip without them, except in CI (CI=true), where they fail."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node and npm:
        return node, npm
    reason = "needs node and npm for the real OpenID provider (oidc-provider, tests/oidc/provider)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}: absent in CI")
    pytest.skip(reason)


def _first_line(process: subprocess.Popen[str], timeout_s: float) -> str:
    """The provider's first line on stdout, or '' if it says nothing in time (it is stopped by the caller)."""
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(process.stdout.readline() if process.stdout else ""))
    reader.start()
    reader.join(timeout_s)
    return line[0] if line else ""


@dataclass(frozen=True)
class OpenIdProvider:
    issuer: str
    discovery: dict[str, Any]
    jwks: dict[str, Any]


@pytest.fixture(scope="session")
def openid_provider(live_server, tmp_path_factory) -> Iterator[OpenIdProvider]:
    node, npm = node_and_npm()
    if not (PROVIDER / "node_modules" / "oidc-provider").is_dir():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=PROVIDER, check=True,
                       timeout=300)  # fmt: skip
    home = tmp_path_factory.mktemp("oidc")
    callback = f"{live_server.url}/oidc/callback/"
    clients = [{"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "redirect_uris": [callback],
                "post_logout_redirect_uris": [f"{live_server.url}/accounts/login/"]}]  # fmt: skip
    (home / "provider.json").write_text(json.dumps({"clients": clients, "users": PROVIDER_USERS}))
    log = (home / "provider.log").open("w")
    process = subprocess.Popen([node, "provider.mjs", str(home / "provider.json")], cwd=PROVIDER,
                               stdout=subprocess.PIPE, stderr=log, text=True)  # fmt: skip
    try:
        line = _first_line(process, timeout_s=60)
        if not line.startswith("issuer "):
            raise RuntimeError(f"the OpenID provider did not start:\n{line}{(home / 'provider.log').read_text()}")
        issuer = line.split()[1]
        discovery = requests.get(f"{issuer}/.well-known/openid-configuration", timeout=10).json()
        jwks = requests.get(discovery["jwks_uri"], timeout=10).json()
        yield OpenIdProvider(issuer=issuer, discovery=discovery, jwks=jwks)
    finally:
        stop_by_pid(process)
        log.close()


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _remount_urls() -> None:
    """governance/urls.py mounts /oidc/ and the login page's button by OIDC_ENABLED when it is imported."""
    import governance.urls

    importlib.reload(governance.urls)
    clear_url_caches()


def _oidc_settings_from_env() -> dict[str, Any]:
    """What governance/conf/oidc.py makes of the environment now (as settings.py would at start-up)."""
    import governance.conf.oidc

    module = importlib.reload(governance.conf.oidc)
    return {name: getattr(module, name) for name in dir(module) if name.startswith("OIDC_")}


def operator_env(provider: OpenIdProvider, client_id: str = CLIENT_ID) -> dict[str, str]:
    """The variables an operator sets, read off the provider's discovery document as the README says."""
    found = provider.discovery
    return {
        "OIDC_RP_CLIENT_ID": client_id, "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET, "OIDC_OP_ISSUER": found["issuer"],
        "OIDC_OP_AUTHORIZATION_ENDPOINT": found["authorization_endpoint"],
        "OIDC_OP_TOKEN_ENDPOINT": found["token_endpoint"], "OIDC_OP_USER_ENDPOINT": found["userinfo_endpoint"],
        "OIDC_OP_JWKS_ENDPOINT": found["jwks_uri"], "OIDC_OP_LOGOUT_ENDPOINT": found["end_session_endpoint"],
        "OIDC_ADMIN_GROUPS": "platform-admins",
        "OIDC_FINANCE_GROUPS": "finance",
    }  # fmt: skip


@pytest.fixture
def sso(openid_provider, settings, monkeypatch) -> Iterator[Callable[..., None]]:
    """Single sign-on on: `sso(**env)` applies the operator's variables (operator_env, overridden by env) through
    the settings module, adds the backend and mounts /oidc/, as a start-up with those variables would."""

    def _configure(**env: str) -> None:
        for name in [n for n in os.environ if n.startswith("OIDC_")]:
            monkeypatch.delenv(name)
        for name, value in {**operator_env(openid_provider), **env}.items():
            monkeypatch.setenv(name, value)
        for name, value in _oidc_settings_from_env().items():
            setattr(settings, name, value)
        settings.AUTHENTICATION_BACKENDS = [*BACKENDS, "governance.org.oidc.GovernanceOIDCBackend"]
        csp = copy.deepcopy(settings.CONTENT_SECURITY_POLICY)  # and its form-action, as settings.py extends it
        csp["DIRECTIVES"]["form-action"] += settings.OIDC_FORM_ACTION
        settings.CONTENT_SECURITY_POLICY = csp
        _remount_urls()

    enabled = settings.OIDC_ENABLED
    yield _configure
    monkeypatch.undo()
    _oidc_settings_from_env()
    settings.OIDC_ENABLED = enabled
    _remount_urls()
