"""The plain fallback: a job id the launcher put in the process environment (GPU_COLLECTOR_JOB by default)."""

from __future__ import annotations

from collectors.host import Host
from collectors.jobs.base import register


@register
class LabelMapper:
    name = "label"

    def __init__(self, *, host: Host, job_env: str | None = None, **_: str | None) -> None:
        self.host = host
        self.variable = job_env or "GPU_COLLECTOR_JOB"

    def job_of(self, pid: int) -> str | None:
        return self.host.environ(pid).get(self.variable) or None
