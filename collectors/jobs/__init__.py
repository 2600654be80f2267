"""Job mappers: from a process on a GPU to the scheduler's job id. One module per scheduler, one registry.

Mappers are tried in the configured order; the first that knows the process wins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from collectors.host import Host


class JobMapper(Protocol):
    name: str

    def job_of(self, pid: int) -> str | None: ...


MAPPERS: dict[str, Callable[..., JobMapper]] = {}
M = TypeVar("M", bound=JobMapper)


def register(cls: type[M]) -> type[M]:
    MAPPERS[cls.name] = cls
    return cls


class JobMapping:
    """The chain of mappers of one agent, with the NUMA nodes a process's CPUs sit on."""

    def __init__(self, mappers: list[JobMapper], host: Host) -> None:
        self.mappers = mappers
        self.host = host
        self.known: dict[int, tuple[str | None, list[int] | None]] = {}
        self.seen: set[int] = set()

    def resolve(self, pid: int) -> tuple[str | None, list[int] | None]:
        """(job, NUMA nodes of its CPUs) of a process, read once while NVML keeps listing it."""
        self.seen.add(pid)
        if pid not in self.known:
            self.known[pid] = (self.job_of(pid), self.cpu_numa_nodes(pid))
        return self.known[pid]

    def end_round(self) -> None:
        # A pid NVML no longer lists is forgotten, so a reused pid is looked up afresh.
        self.known = {pid: entry for pid, entry in self.known.items() if pid in self.seen}
        self.seen = set()

    def job_of(self, pid: int) -> str | None:
        for mapper in self.mappers:
            if (job := mapper.job_of(pid)) is not None:
                return job
        return None

    def cpu_numa_nodes(self, pid: int) -> list[int] | None:
        cpus = self.host.cpus_allowed(pid)
        if cpus is None:
            return None
        return self.host.numa_nodes_of(cpus) or None


def build_mapping(names: list[str], *, host: Host, **options: str | None) -> JobMapping:
    from collectors.jobs import kubernetes, label, slurm  # noqa: F401 - registers the mappers

    unknown = [n for n in names if n not in MAPPERS]
    if unknown:
        raise ValueError(f"job mapper: unknown {', '.join(unknown)} (known: {', '.join(sorted(MAPPERS))})")
    return JobMapping([MAPPERS[n](host=host, **options) for n in names], host)
