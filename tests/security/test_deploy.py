"""Replays of issue 15 (deployment): `check --deploy` is clean with a proper secret, DEBUG off means HTTPS only,
and every page carries a Content-Security-Policy that its own scripts live within."""

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = {"DEBUG": "0", "ALLOWED_HOSTS": "example.com", "CACHE_URL": "redis://127.0.0.1:6379/15"}


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    # DJANGO_ALLOW_ASYNC_UNSAFE is the test run's own (tests/conftest.py); a deployment never sets it.
    unset = {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    clean = {k: v for k, v in os.environ.items() if k not in unset and k not in {"CACHE_URL", "REDIS_URL"}}
    clean = {k: v for k, v in clean.items() if not k.startswith(("SECURE_", "TLS_PROXY"))}
    env = {**clean, "DJANGO_SETTINGS_MODULE": "governance.settings", "SECRET_KEY": secrets.token_urlsafe(50), **env}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def _setting(name: str, **env: str) -> str:
    code = "import django; django.setup(); from django.conf import settings; "
    code += f"print(repr(getattr(settings, {name!r}, None)))"
    result = _run(["-c", code], **{**PRODUCTION, **env})
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_check_deploy_is_clean_with_debug_off_and_a_proper_secret():
    result = _run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], **PRODUCTION)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_without_cache_url_throttle_counters_live_in_the_database_shared_by_every_worker():
    result = _run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], **{**PRODUCTION, "CACHE_URL": ""})

    assert "django.core.cache.backends.db.DatabaseCache" in _setting("CACHES", CACHE_URL="")
    assert result.returncode == 0 and "governance.W001" not in result.stdout + result.stderr


def test_debug_off_sends_hsts_for_a_year_with_subdomains_and_redirects_plain_http():
    assert _setting("SECURE_HSTS_SECONDS") == str(365 * 24 * 3600)
    assert _setting("SECURE_HSTS_INCLUDE_SUBDOMAINS") == "True"
    assert _setting("SECURE_SSL_REDIRECT") == "True"
    assert _setting("SECURE_SSL_REDIRECT", SECURE_SSL_REDIRECT="0") == "False"
    assert _setting("SECURE_HSTS_SECONDS", SECURE_HSTS_SECONDS="600") == "600"


def test_the_forwarded_proto_header_is_believed_only_behind_a_trusted_proxy():
    assert _setting("SECURE_PROXY_SSL_HEADER") == "None"
    assert _setting("SECURE_PROXY_SSL_HEADER", TLS_PROXY_TRUSTED="1") == "('HTTP_X_FORWARDED_PROTO', 'https')"


def _test_database_url() -> str:
    """The test run's database (migrated: the rate counts' table is there), for a subprocess."""
    from django.db import connection

    return os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]


# Transactional: the subprocess commits its rate count, which the flush after the test removes (a test after it on
# the same database would otherwise find a row it did not write).
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not os.environ.get("DATABASE_URL"), reason="the subprocess needs the PostgreSQL test database")
def test_a_plain_http_request_is_redirected_to_https_and_an_https_answer_carries_hsts():
    code = (
        "import django; django.setup(); from django.test import Client; c = Client(); "
        "r = c.get('/api/v1/', HTTP_HOST='example.com'); print(r.status_code, r['Location']); "
        "r = c.get('/api/v1/', HTTP_HOST='example.com', secure=True); "
        "print(r.status_code, r['Strict-Transport-Security'])"
    )

    # Its throttles count in the test database's api_ratecount, not in Redis.
    result = _run(["-c", code], **{**PRODUCTION, "CACHE_URL": "", "DATABASE_URL": _test_database_url()})

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "301 https://example.com/api/v1/", "200 max-age=31536000; includeSubDomains",
    ]  # fmt: skip


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/accounts/login/", "/?month=2026-11", "/api/docs/", "/admin/"])
def test_every_page_carries_a_policy_that_allows_scripts_from_this_site_only(client, cast, url):
    client.force_login(cast.admin)

    response = client.get(url)

    policy = response["Content-Security-Policy"]
    # The header's directives in any order (django-csp does not keep one).
    directives = {d.split()[0]: d.split()[1:] for d in policy.split(";") if d.strip()}
    assert directives["default-src"] == ["'self'"] and directives["script-src"] == ["'self'"]
    assert "unsafe-eval" not in policy and directives["frame-ancestors"] == ["'none'"]
    inline = [tag for tag in re.findall(r"<script[^>]*>", response.content.decode())
              if "src=" not in tag and 'type="application/json"' not in tag]  # fmt: skip
    assert inline == [], "an inline script would be blocked by the policy"
