"""The simulated cluster as a source: the demo and test source, no GPU needed."""

from __future__ import annotations

from datetime import datetime, timedelta

from collectors.records import Record
from collectors.simulate import SimulatedCluster
from collectors.sources import SourceConfig


class SimulateSource:
    name = "simulate"

    def __init__(self, *, cluster: str, gpus: int, start: datetime) -> None:
        # Scheduled from two days back, so that jobs already run when the agent starts, and a week ahead.
        self.sim = SimulatedCluster(
            cluster=cluster, gpus=gpus, start=start - timedelta(days=2), end=start + timedelta(days=7)
        )
        self.announced: set[str] = set()

    @classmethod
    def open(cls, config: SourceConfig, start: datetime | None = None) -> SimulateSource:
        return cls(cluster=config.cluster, gpus=config.gpus, start=start or datetime.now().astimezone())

    def read(self, now: datetime) -> list[Record]:
        # A job record goes out when the agent first sees the job; the server keeps the latest.
        jobs = [j for j in self.sim.job_records(now) if j.start_time is not None and j.end_time is None]
        new = [j for j in jobs if j.job_id not in self.announced]
        self.announced.update(j.job_id for j in new)
        return [*new, *self.sim.samples_at(now)]

    def close(self) -> None:
        pass


SOURCE = SimulateSource
