"""Stopping a program a test started (Prometheus, the OpenID provider...): by its PID, gently first."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_by_pid(process: subprocess.Popen, *, grace_s: float = 15.0) -> None:
    """SIGTERM, and SIGKILL if it has not exited within `grace_s`; reaps it either way."""
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
