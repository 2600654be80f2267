"""A simulated cluster: realistic job and sample records without a GPU (demo data, tests, benchmarks).

Jobs of several teams fill the GPUs of a few 8-GPU nodes. Each job follows a profile seen on real
clusters: steady training, idle holders, bursty notebooks, memory-heavy jobs, jobs that go idle
after training, data-starved loaders, small inference services that would fit a MIG slice.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from collectors.records import JobRecord, Record, SampleRecord

GPU_MODEL = "NVIDIA H100 80GB HBM3"
GPU_MEM_MIB = 81559.0
GPUS_PER_NODE = 8

TEAMS: dict[str, list[tuple[str, list[str]]]] = {
    "nlp": [("llm-pretrain", ["alice", "bob"]), ("llm-eval", ["carol"])],
    "vision": [("detector", ["dave", "erin"]), ("segmentation", ["frank"])],
    "recsys": [("ranking", ["grace"]), ("feature-serving", ["heidi"])],
}

# profile: (weight, GPUs choices, hours range, label kind)
PROFILES: dict[str, tuple[float, tuple[int, ...], tuple[float, float], str]] = {
    "busy": (0.30, (1, 2, 4, 8), (6, 72), "training"),
    "idle": (0.08, (1, 2), (4, 30), "notebook"),
    "bursty": (0.12, (1,), (3, 24), "notebook"),
    "memory_heavy": (0.12, (1, 2, 4), (6, 48), "training"),
    "busy_then_idle": (0.10, (1, 2), (4, 12), "training"),
    "starved": (0.10, (2, 4), (6, 36), "training"),
    "overallocated": (0.08, (4, 8), (6, 36), "training"),
    "small_inference": (0.10, (1,), (24, 96), "inference"),
}


@dataclass
class SimJob:
    job_id: str
    team: str
    project: str
    user: str
    profile: str
    gpus: list[tuple[int, int]]  # (node, gpu index)
    submit: datetime
    start: datetime
    end: datetime
    kind: str
    misaligned_numa: bool
    phase: float = field(default=0.0)

    def record(self, cluster: str, now: datetime) -> JobRecord:
        ended = self.end <= now
        started = self.start <= now
        return JobRecord(
            cluster=cluster,
            job_id=self.job_id,
            user=self.user,
            project=self.project,
            team=self.team,
            gpus=Decimal(len(self.gpus)),
            gpu_model=GPU_MODEL,
            submit_time=self.submit,
            start_time=self.start if started else None,
            end_time=self.end if ended else None,
            state="completed" if ended else "running" if started else "pending",
            labels={"kind": self.kind},
        )


class SimulatedCluster:
    """A deterministic cluster of `gpus` H100s (seeded) between `start` and `end`."""

    def __init__(self, *, cluster: str = "demo", gpus: int = 32, start: datetime, end: datetime, seed: int = 7):
        if gpus < 1:
            raise ValueError("gpus must be at least 1")
        self.cluster = cluster
        self.gpu_count = gpus
        self.start = start
        self.end = end
        self.rng = random.Random(seed)
        self.jobs: list[SimJob] = []
        self._schedule()

    def _gpu_slots(self) -> list[tuple[int, int]]:
        return [(i // GPUS_PER_NODE, i % GPUS_PER_NODE) for i in range(self.gpu_count)]

    def _schedule(self) -> None:
        rng = self.rng
        # The slots by (free time, position) in a heap: taking a job's first free slots costs log(GPUs) each, where
        # sorting every slot for every job made a 10,000-GPU layout take minutes.
        free = [(self.start - timedelta(hours=rng.uniform(0, 24)), slot) for slot in self._gpu_slots()]
        heapq.heapify(free)
        names = list(PROFILES)
        weights = [PROFILES[name][0] for name in names]
        counter = 1000
        while free[0][0] < self.end:
            profile = rng.choices(names, weights)[0]
            _, sizes, (low, high), kind = PROFILES[profile]
            size = min(rng.choice(sizes), self.gpu_count)
            # Pack onto one node where possible (first free slots, ordered by free time then position).
            taken = [heapq.heappop(free) for _ in range(size)]
            slots = [slot for _, slot in taken]
            ready = taken[-1][0]
            gap = timedelta(hours=rng.expovariate(1 / 3))  # some capacity stays unallocated
            start = ready + gap
            duration = timedelta(hours=rng.uniform(low, high))
            team = rng.choice(list(TEAMS))
            project, users = rng.choice(TEAMS[team])
            counter += 1
            job = SimJob(
                job_id=str(counter),
                team=team,
                project=project,
                user=rng.choice(users),
                profile=profile,
                gpus=slots,
                submit=start - timedelta(minutes=rng.uniform(0, 90)),
                start=start,
                end=start + duration,
                kind=kind,
                misaligned_numa=rng.random() < 0.15,
                phase=rng.uniform(0, math.tau),
            )
            self.jobs.append(job)
            for slot in slots:
                heapq.heappush(free, (job.end, slot))

    def node_name(self, node: int) -> str:
        return f"{self.cluster}-gpu-{node:03d}"

    def gpu_uuid(self, slot: tuple[int, int]) -> str:
        node, index = slot
        return f"GPU-{self.cluster}-{node:03d}-{index:02d}-0000-4000-8000-sim"

    def _usage(self, job: SimJob, gpu_pos: int, now: datetime) -> tuple[float, float, float, float]:
        """(sm %, memory MiB, io wait %, host cpu %) of one GPU of `job` at `now`."""
        rng = self.rng
        elapsed_h = (now - job.start).total_seconds() / 3600
        p = job.profile
        sm: float
        mem: float
        io: float
        cpu: float
        if p == "busy":
            sm, mem, io, cpu = rng.gauss(88, 5), 0.70 * GPU_MEM_MIB, 2, 35
        elif p == "idle":
            sm, mem, io, cpu = 0.0, 0.02 * GPU_MEM_MIB, 0, 2
        elif p == "bursty":
            on = math.sin(elapsed_h * 2 + job.phase) > 0.4
            sm, mem, io, cpu = (rng.gauss(70, 15) if on else 0.0), 0.25 * GPU_MEM_MIB, 1, 10
        elif p == "memory_heavy":
            sm, mem, io, cpu = rng.gauss(30, 6), 0.95 * GPU_MEM_MIB, 3, 25
        elif p == "busy_then_idle":
            busy = elapsed_h < 1.0
            sm, mem, io, cpu = (rng.gauss(85, 5) if busy else 0.0), 0.55 * GPU_MEM_MIB, 1, 20 if busy else 1
        elif p == "starved":
            sm, mem, io, cpu = abs(rng.gauss(18, 14)), 0.35 * GPU_MEM_MIB, rng.uniform(25, 45), 97
        elif p == "overallocated":
            works = gpu_pos < max(1, len(job.gpus) // 4)
            sm, mem, io, cpu = (rng.gauss(80, 6) if works else 0.0), (0.6 if works else 0.01) * GPU_MEM_MIB, 2, 30
        else:  # small_inference
            sm, mem, io, cpu = abs(rng.gauss(6, 2)), 0.11 * GPU_MEM_MIB, 1, 8
        return min(max(sm, 0.0), 100.0), min(mem, GPU_MEM_MIB), io, cpu

    def samples_at(self, now: datetime) -> Iterator[SampleRecord]:
        running: dict[tuple[int, int], tuple[SimJob, int]] = {}
        for job in self.jobs:
            if job.start <= now < job.end:
                for pos, slot in enumerate(job.gpus):
                    running[slot] = (job, pos)
        for slot in self._gpu_slots():
            node, index = slot
            gpu_numa = 0 if index < GPUS_PER_NODE // 2 else 1
            entry = running.get(slot)
            if entry is None:
                sm, mem, io, cpu, job_id, cpu_numa = 0.0, 0.0, None, None, None, None
            else:
                job, pos = entry
                sm, mem, io, cpu = self._usage(job, pos, now)
                job_id = job.job_id
                cpu_numa = [1 - gpu_numa] if job.misaligned_numa else [gpu_numa]
            yield SampleRecord(
                cluster=self.cluster,
                node=self.node_name(node),
                gpu_uuid=self.gpu_uuid(slot),
                gpu_index=index,
                gpu_model=GPU_MODEL,
                ts=now,
                job_id=job_id,
                sm_util=round(sm, 1),
                mem_used_mib=round(mem),
                mem_total_mib=GPU_MEM_MIB,
                power_w=round(70 + 6.3 * sm, 1),
                gpu_numa_node=gpu_numa,
                job_cpu_numa_nodes=cpu_numa,
                io_wait=None if io is None else round(io, 1),
                host_cpu_util=None if cpu is None else round(min(cpu, 100), 1),
            )

    def job_records(self, now: datetime) -> list[JobRecord]:
        return [job.record(self.cluster, now) for job in self.jobs if job.submit <= now and job.end > self.start]

    def history(self, interval: timedelta, *, from_first_job: bool = True) -> Iterator[Record]:
        """Job records as known at `end`, then every GPU's sample every `interval` up to `end`, from `start` or, where
        a job it reports began before `start`, from that job's start (on the same grid): the collectors ran while
        the jobs they report held their GPUs, so no record names GPUs the fleet has not seen. `from_first_job=False`:
        from `start` only, for a window whose earlier samples another window sent (the ingest bench's)."""
        records = self.job_records(self.end)
        yield from records
        began = self.start
        if from_first_job:
            began = min((r.start_time for r in records if r.start_time is not None), default=self.start)
        now = self.start - interval * max(0, math.ceil((self.start - began) / interval))
        while now < self.end:
            yield from self.samples_at(now)
            now += interval
