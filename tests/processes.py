"""Programs a test starts: another web process on the test's database, and stopping a program (Prometheus, the
OpenID provider...) by its PID, gently first."""

from __future__ import annotations

import os
import signal
import subprocess

from django.db import connection


def web_process_env(**settings: str) -> dict[str, str]:
    """The environment of another Django process on this test's database (DATABASE_URL names the server, the test
    database is its own), counting in the database as this one does (no CACHE_URL), with these settings added."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "governance.settings", **settings}
    env["DATABASE_URL"] = env["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]
    env.pop("CACHE_URL", None)
    env.pop("REDIS_URL", None)
    return env


def stop_by_pid(process: subprocess.Popen, *, grace_s: float = 15.0) -> None:
    """SIGTERM, and SIGKILL if it has not exited within `grace_s`; reaps it either way."""
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
