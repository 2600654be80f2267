"""The project's own wiring: migrations in step with models, docker-compose valid."""

import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.django_db
def test_migrations_are_in_step_with_the_models():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


@pytest.mark.skipif(not shutil.which("docker-compose"), reason="Debian's docker-compose is not installed")
def test_docker_compose_config_accepts_the_stack():
    result = subprocess.run(
        ["docker-compose", "-f", "docker-compose.yml", "config", "--services"],
        cwd=ROOT, env={"SECRET_KEY": "x", "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=False,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert {"postgres", "redis", "web", "worker-ingest", "worker-analysis", "beat"} <= set(result.stdout.split())
