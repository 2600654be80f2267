"""A Slurm cluster's command line as stand-ins on PATH that record their calls, and jobs fed sample by sample on a
clock the test moves (each round of the check is given its `now`; no test sleeps)."""

from __future__ import annotations

import stat
from datetime import datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.core.management import call_command

from tests.factories import at, ingest, iso, job_record, rate, series

START = at("2026-11-03T09:00:00Z")
STANDIN = """#!/bin/sh
echo "$(basename "$0") $*" >> "{log}"
{extra}
"""


class SlurmStandIns:
    """`scontrol` and `scancel` that append their command line to a log; `fail` makes the next ones exit 1."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.log = folder, folder / "calls.log"
        self.write(fail=False)

    def write(self, *, fail: bool) -> None:
        for name in ("scontrol", "scancel"):
            script = self.folder / name
            extra = 'echo "slurm_requeue error: Job is no longer pending" >&2; exit 1' if fail else "exit 0"
            script.write_text(STANDIN.format(log=self.log, extra=extra))
            script.chmod(script.stat().st_mode | stat.S_IXUSR)

    @property
    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
def slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SlurmStandIns:
    folder = tmp_path / "slurm-bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    return SlurmStandIns(folder)


class Jobs:
    """Running jobs on cluster c1, each on GPUs of its own, fed samples every 5 minutes up to a moment."""

    def __init__(self) -> None:
        self.fed: dict[str, datetime] = {}
        self.gpus: dict[str, int] = {}

    def start(self, *job_ids: str, gpus: int = 1, labels: dict[str, str] | None = None, **job: Any) -> None:
        records = []
        for job_id in job_ids:
            self.gpus[job_id] = len(self.gpus) * 8
            self.fed[job_id] = START
            records.append(job_record(job_id=job_id, gpus=gpus, submit_time=iso(START), start_time=iso(START),
                                      labels=labels or {"kind": "training"}, **job))  # fmt: skip
        ingest(records)

    def feed(self, *job_ids: str, until: datetime, sm: float, gpus: int = 1, busy_gpus: int = 0) -> None:
        """Samples from where each job's feed stopped to `until`, in one batch: `sm` on every GPU (the first
        `busy_gpus` at 80)."""
        records = []
        for job_id in job_ids:
            since = self.fed[job_id]
            minutes = int((until - since).total_seconds() // 60)
            for n in range(gpus):
                index = self.gpus[job_id] + n
                records += series(
                    start=since, minutes=minutes, every_s=300, job_id=job_id, gpu_uuid=f"GPU-{index:04d}",
                    gpu_index=n, node=f"node-{job_id}", sm_util=80.0 if n < busy_gpus else sm,
                )  # fmt: skip
            self.fed[job_id] = until
        if records:
            ingest(records)


@pytest.fixture
def jobs(cast) -> Jobs:
    rate(price="2.00")
    return Jobs()


def policy(**fields: Any):
    from governance.remediation.policies import policy_save

    values: dict[str, Any] = {"name": "idle-c1", "cluster": "c1", "mode": "act", "condition": "idle_gpu",
                              "idle_hours": 2, "grace_minutes": 30, "max_actions_per_hour": 5} | fields  # fmt: skip
    return policy_save(**values)


def minutes(n: int) -> timedelta:
    return timedelta(minutes=n)


T0 = START + timedelta(hours=3, minutes=5)  # 12:05: idle since 10:00, after an hour of work
LIMIT = "2026-11-03T23:05:00Z"  # Slurm's time limit of the job: 10 h after an action at 13:05


def idle_job(jobs: Jobs, *job_ids: str, labels: dict | None = None, until: datetime = T0) -> None:
    """Jobs that worked for an hour from START and sat idle since, with their findings evaluated at `until`."""
    from governance.efficiency.services import findings_evaluate_all

    job_ids = job_ids or ("4242",)
    jobs.start(*job_ids, labels=labels or {"kind": "training", "partition": "gpu", "time_limit_at": LIMIT})
    jobs.feed(*job_ids, until=START + timedelta(hours=1), sm=80.0)
    jobs.feed(*job_ids, until=until, sm=0.0)
    findings_evaluate_all(now=until)


def rounds(jobs: Jobs, moments: list[datetime], *, job_ids: tuple[str, ...] = ("4242",), sm: float = 0.0) -> None:
    """At each moment: the jobs' samples up to it, then one round of the check through the command."""
    for moment in moments:
        jobs.feed(*[j for j in job_ids if jobs.fed[j] < moment], until=moment, sm=sm)
        with time_machine.travel(moment, tick=False):
            call_command("remediation_check", stdout=StringIO())
