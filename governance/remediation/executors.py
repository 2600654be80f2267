"""Carrying out an action: Slurm through its CLI (`scontrol requeue`, `scancel`), Kubernetes through its API
(governance/remediation/kubernetes_api.py). Each returns what was run and what came back, for the record.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

SLURM_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")
CLI_TIMEOUT_S = 30


@dataclass(frozen=True)
class ActionResult:
    command: str
    ok: bool
    output: str


def slurm_command(*, action: str, job_id: str) -> list[str]:
    """The command line for a Slurm job: `scontrol requeue ID` or `scancel ID`."""
    if not SLURM_JOB_ID.match(job_id):
        raise ValueError(f"job id {job_id!r} is not a Slurm job id")
    return ["scontrol", "requeue", job_id] if action == "requeue" else ["scancel", job_id]


def slurm_act(*, action: str, job_id: str) -> ActionResult:
    """Run the Slurm CLI found on PATH; a missing program or a non-zero exit is a failed action, never a raise."""
    try:
        argv = slurm_command(action=action, job_id=job_id)
    except ValueError as exc:
        return ActionResult("", False, str(exc))
    shown = " ".join(argv)
    program = shutil.which(argv[0])
    if program is None:
        return ActionResult(shown, False, f"{argv[0]} is not on PATH")
    try:
        done = subprocess.run(  # noqa: S603 (a fixed program and a validated job id)
            [program, *argv[1:]], capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ActionResult(shown, False, str(exc))
    output = (done.stdout + done.stderr).strip()[:2000]
    return ActionResult(shown, done.returncode == 0, f"exit {done.returncode}" + (f": {output}" if output else ""))
