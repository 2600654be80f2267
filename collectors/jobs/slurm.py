"""Slurm: SLURM_JOB_ID in the process environment, else the job_<id> element of its cgroup path."""

from __future__ import annotations

import re

from collectors.host import Host
from collectors.jobs.base import register

_CGROUP_JOB = re.compile(r"/job_(\d+)(?:/|$)")


@register
class SlurmMapper:
    name = "slurm"

    def __init__(self, *, host: Host, **_: str | None) -> None:
        self.host = host

    def job_of(self, pid: int) -> str | None:
        env = self.host.environ(pid)
        # An array task has a job id of its own in SLURM_JOB_ID, the one sacct reports it under.
        if job := env.get("SLURM_JOB_ID"):
            return job
        for path in self.host.cgroup(pid):
            if match := _CGROUP_JOB.search(path):
                return match[1]
        return None
