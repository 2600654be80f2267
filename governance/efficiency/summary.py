"""A job's usage summary: plain data built from the hourly rollups, the only input the rules read."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from math import sqrt

from collectors.topology import SAYS, kind

MIB_PER_GIB = 1024.0


@dataclass(frozen=True)
class Placement:
    """The job's GPUs on `node` and their farthest link, against a free set of the same size and its farthest."""

    node: str
    indexes: tuple[int, ...]
    link: str
    free: tuple[int, ...]
    free_link: str

    def says(self) -> str:
        gpus = ", ".join(f"GPU{i}" for i in self.indexes)
        free = ", ".join(f"GPU{i}" for i in self.free)
        return (
            f"the job's GPUs on {self.node} ({gpus}) talk {SAYS[kind(self.link)]} ({self.link}) while {free}, "
            f"connected {SAYS[kind(self.free_link)]} ({self.free_link}), sat free on the node for the whole run"
        )


@dataclass(frozen=True)
class HourStat:
    """One GPU's rollup for one hour of the job (a JobGpuHour row, without the ORM)."""

    hour: datetime
    samples: int
    idle_samples: int
    sm_sum: float
    sm_max: float | None
    sm_sq_sum: float
    mem_used_max: float | None  # None: no sample of the hour knew its memory
    mem_total_mib: float | None
    power_sum: float = 0.0
    power_samples: int = 0
    numa_mismatch_samples: int = 0
    io_wait_sum: float = 0.0
    io_wait_samples: int = 0
    host_cpu_sum: float = 0.0
    host_cpu_samples: int = 0
    sm_samples: int | None = None  # samples that knew SM; None: all of them did
    # Profiling counters where the source gives them (GPM through NVML, DCGM's profiling fields); 0 samples: unknown.
    tensor_sum: float = 0.0
    tensor_samples: int = 0
    dram_sum: float = 0.0
    dram_samples: int = 0
    nvlink_sum: float = 0.0  # MiB/s
    nvlink_samples: int = 0
    pcie_sum: float = 0.0  # MiB/s, rx + tx
    pcie_samples: int = 0
    # Set for a job on a share of one GPU (efficiency.sharing): the other jobs seen on the GPU this hour, and the
    # GPU's own mean SM over all its samples of the hour (every tenant's).
    co_tenants: int = 0
    gpu_sm_mean: float | None = None
    # The job's own processes' SM where its shared GPU was split by process (NVML per-process utilisation).
    job_sm_sum: float = 0.0
    job_sm_samples: int = 0

    @property
    def sm_known(self) -> int:
        return self.samples if self.sm_samples is None else self.sm_samples

    @property
    def sm_mean(self) -> float:
        return self.sm_sum / self.sm_known if self.sm_known else 0.0

    @property
    def sm_std(self) -> float:
        if not self.sm_known:
            return 0.0
        return sqrt(max(self.sm_sq_sum / self.sm_known - self.sm_mean**2, 0.0))


@dataclass(frozen=True)
class GpuSummary:
    """What one GPU of the job did, hour by hour, and where it sits."""

    gpu_id: int
    node: str
    index: int
    model: str
    memory_total_mib: float | None
    numa_node: int | None = None
    mig_profile: str = ""
    hours: tuple[HourStat, ...] = ()

    @property
    def samples(self) -> int:
        return sum(h.samples for h in self.hours)

    @property
    def idle_samples(self) -> int:
        return sum(h.idle_samples for h in self.hours)

    @property
    def sm_known(self) -> int:
        return sum(h.sm_known for h in self.hours)

    @property
    def sm_mean(self) -> float:
        n = self.sm_known
        return sum(h.sm_sum for h in self.hours) / n if n else 0.0

    @property
    def mem_known(self) -> bool:
        return any(h.mem_used_max is not None for h in self.hours)

    @property
    def mem_peak_mib(self) -> float:
        return max((h.mem_used_max for h in self.hours if h.mem_used_max is not None), default=0.0)

    @property
    def numa_mismatch_samples(self) -> int:
        return sum(h.numa_mismatch_samples for h in self.hours)


@dataclass(frozen=True)
class JobSummary:
    """Everything the rules know about one job. `end` is the end time, or the last sampled moment if running."""

    job_id: int
    external_id: str
    cluster: str
    gpus_requested: float | None  # None: no source knows the count; the GPUs seen stand for it
    gpu_model: str
    start: datetime
    end: datetime
    running: bool
    labels: dict[str, str] = field(default_factory=dict)
    gpus: tuple[GpuSummary, ...] = ()
    rate: Decimal | None = None
    currency: str = "USD"
    cluster_sm_mean: float | None = None
    largest_node_gpus: int = 0
    placement: Placement | None = None  # set where the node's topology shows a nearer free set (efficiency.placement)

    @property
    def runtime_hours(self) -> float:
        return max((self.end - self.start).total_seconds(), 0.0) / 3600

    @property
    def hours_per_sample(self) -> float:
        """Time one sample stands for: the job's span shared among the samples of its best-covered GPU."""
        most = max((g.samples for g in self.gpus), default=0)
        return self.runtime_hours / most if most else 0.0

    @property
    def gpu_count(self) -> int | float:
        """The GPUs it holds: its declared count (or share of one GPU) where known, at least the GPUs it was seen on."""
        held = max(self.gpus_requested or 0, len(self.gpus))
        return int(held) if held == int(held) else held

    @property
    def samples(self) -> int:
        return sum(g.samples for g in self.gpus)

    @property
    def sm_known(self) -> int:
        """Samples that knew SM: a job none of whose samples did has an unknown SM, never an idle one."""
        return sum(g.sm_known for g in self.gpus)

    @property
    def sm_mean(self) -> float:
        n = self.sm_known
        return sum(h.sm_sum for g in self.gpus for h in g.hours) / n if n else 0.0

    @property
    def own_sm_mean(self) -> float | None:
        """The job's own processes' mean SM where every sample that knew SM split its shared GPU by process; None
        otherwise (its SM is then the GPU's, every tenant's)."""
        hours = [h for g in self.gpus for h in g.hours]
        own = sum(h.job_sm_samples for h in hours)
        if not own or own < self.sm_known:
            return None
        return sum(h.job_sm_sum for h in hours) / own

    @property
    def mem_known(self) -> bool:
        return any(g.mem_known for g in self.gpus)

    @property
    def mem_peak_mib(self) -> float:
        return max((g.mem_peak_mib for g in self.gpus), default=0.0)

    @property
    def mem_total_mib(self) -> float:
        """0.0 where no GPU's memory is known: the memory rules then stay silent."""
        if not self.mem_known:
            return 0.0
        return max((g.memory_total_mib or 0.0 for g in self.gpus), default=0.0)

    def profile_mean(self, counter: str) -> float | None:
        """The sample-weighted mean of a profiling counter over the job's GPU-hours (`tensor`, `dram` in %, `nvlink`,
        `pcie` in MiB/s per GPU); None where no sample knew it."""
        hours = [h for g in self.gpus for h in g.hours]
        n = sum(getattr(h, f"{counter}_samples") for h in hours)
        return sum(getattr(h, f"{counter}_sum") for h in hours) / n if n else None

    @property
    def allocated_gpu_hours(self) -> float:
        return self.gpu_count * self.runtime_hours

    def cost(self, gpu_hours: float) -> Decimal:
        """The price of `gpu_hours` at the job's rate (zero without a rate card)."""
        if self.rate is None:
            return Decimal(0)
        return Decimal(str(round(gpu_hours, 6))) * self.rate

    def hours_by_day(
        self, weight: Callable[[HourStat], float] = lambda h: 1.0, gpus: Iterable[GpuSummary] | None = None
    ) -> dict[date, float]:
        """Held GPU-hours per UTC day of the GPUs' rollup hours, each hour weighted (0-1) by `weight`."""
        per_sample = self.hours_per_sample
        out: dict[date, float] = defaultdict(float)
        for gpu in self.gpus if gpus is None else gpus:
            for h in gpu.hours:
                share = weight(h)
                if share > 0:
                    out[h.hour.date()] += h.samples * per_sample * share
        return dict(out)

    def unused_hours_by_day(self) -> dict[date, float]:
        """The unused share (1 - SM) of each held hour whose SM is known, per day."""
        return self.hours_by_day(lambda h: max(0.0, 1 - h.sm_mean / 100) if h.sm_known else 0.0)


def gib(mib: float) -> float:
    return mib / MIB_PER_GIB
