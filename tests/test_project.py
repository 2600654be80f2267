"""The project's own wiring: migrations in step with models, docker-compose valid, make install from a clean venv."""

import hashlib
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[1]
INSTALL_INPUTS = ("Makefile", "pyproject.toml", "agent/pyproject.toml")


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


def test_make_install_in_a_fresh_venv_brings_the_server_and_the_agent_from_the_checkout(tmp_path):
    """`make run`'s install path: one venv (var/install-venv-<hash of what it reads>, built once) with both."""
    key = hashlib.sha256(b"".join((ROOT / f).read_bytes() for f in INSTALL_INPUTS)).hexdigest()[:16]
    venv = ROOT / "var" / f"install-venv-{key}"
    if not (venv / ".installed").exists():
        for stale in (ROOT / "var").glob("install-venv-*"):
            shutil.rmtree(stale)
        make = subprocess.run(
            ["make", "install", f"VENV={venv}", f"PYTHON={sys.executable}"],
            cwd=ROOT, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        assert make.returncode == 0, make.stdout + make.stderr
    probe = (
        "import collectors.records, governance, importlib.metadata as m; print(m.version('gpu-governance-collector'))"
    )

    imports = subprocess.run([venv / "bin" / "python", "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    dry_run = subprocess.run(
        [venv / "bin" / "gpu-collector", "--source", "simulate", "--gpus", "2", "--once", "--dry-run"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    version = tomllib.loads((ROOT / "agent" / "pyproject.toml").read_text())["project"]["version"]
    assert imports.returncode == 0 and imports.stdout.strip() == version, imports.stderr
    assert dry_run.returncode == 0, dry_run.stderr
    assert dry_run.stdout.count('"kind":"sample"') == 2
