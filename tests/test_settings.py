import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from governance.lib.env import database_from_url, env_bool, env_int

ROOT = Path(__file__).resolve().parents[1]


def _settings_in_subprocess(**env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS"}}
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT, env={**clean, "DJANGO_SETTINGS_MODULE": "governance.settings", **env},
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_debug_off_without_a_secret_key_is_a_loud_error():
    result = _settings_in_subprocess(DEBUG="0", ALLOWED_HOSTS="example.org")

    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr


def test_debug_off_without_allowed_hosts_is_a_loud_error():
    result = _settings_in_subprocess(DEBUG="0", SECRET_KEY="x" * 50)

    assert result.returncode != 0
    assert "ALLOWED_HOSTS must be set when DEBUG is off" in result.stderr


def test_debug_off_with_both_set_starts():
    assert _settings_in_subprocess(DEBUG="0", SECRET_KEY="x" * 50, ALLOWED_HOSTS="example.org").returncode == 0


def test_an_unknown_sample_partition_unit_is_a_loud_error_naming_the_setting():
    result = _settings_in_subprocess(SAMPLE_PARTITION="week")

    assert result.returncode != 0
    assert "SAMPLE_PARTITION: 'week' is neither 'month' nor 'day'" in result.stderr


def test_a_bad_boolean_names_the_variable(monkeypatch):
    monkeypatch.setenv("DEBUG", "maybe")

    with pytest.raises(ImproperlyConfigured, match="DEBUG='maybe' is not a boolean"):
        env_bool("DEBUG", True)


def test_a_bad_integer_names_the_variable(monkeypatch):
    monkeypatch.setenv("INGEST_MAX_BODY_BYTES", "lots")

    with pytest.raises(ImproperlyConfigured, match="INGEST_MAX_BODY_BYTES='lots' is not an integer"):
        env_int("INGEST_MAX_BODY_BYTES", 1)


def test_database_url_switches_to_postgresql():
    db = database_from_url("postgres://gov:s%40cret@db.internal:6543/governance?sslmode=require")

    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["USER"], db["PASSWORD"], db["HOST"], db["PORT"], db["NAME"]) == (
        "gov", "s@cret", "db.internal", "6543", "governance")  # fmt: skip
    assert db["OPTIONS"] == {"sslmode": "require"}


def test_an_unknown_database_scheme_is_refused():
    with pytest.raises(ImproperlyConfigured, match="scheme 'mysql' is not supported"):
        database_from_url("mysql://x@y/z")


FROZEN = """
import gc, sys
{load}
print(gc.get_freeze_count())
"""


@pytest.mark.parametrize(
    "load",
    [
        "import governance.wsgi",
        "import django; django.setup()\n"
        "from celery.signals import worker_process_init; import governance.celery; worker_process_init.send(None)",
    ],
    ids=["web", "worker"],
)
def test_a_web_or_pool_process_freezes_what_it_loaded_out_of_the_collector(load):
    result = subprocess.run(
        [sys.executable, "-c", FROZEN.format(load=load)],
        cwd=ROOT, env={**os.environ, "DJANGO_SETTINGS_MODULE": "governance.settings"},
        capture_output=True, text=True, check=False,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[-1]) > 10_000  # Django and the apps' modules: a full collection skips them
