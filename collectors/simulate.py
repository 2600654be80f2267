"""A simulated cluster: realistic job and sample records without a GPU (demo data, tests, benchmarks).

Jobs of several teams fill the GPUs of a few 8-GPU nodes. Each job follows a profile seen on real
clusters: steady training, idle holders, bursty notebooks, memory-heavy jobs, jobs that go idle
after training, data-starved loaders, small inference services that would fit a MIG slice.
"""

from __future__ import annotations

import heapq
import json
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from collectors.records import JobRecord, Record, SampleRecord

GPU_MODEL = "NVIDIA H100 80GB HBM3"
GPU_MEM_MIB = 81559.0
GPUS_PER_NODE = 8

# How a job's GPU reads in an interval (SimulatedCluster._plan), and one GPU's reading: its plan, sm %, power W
# and io wait % (rounded as records carry them).
Plan = tuple["SimJob", tuple[float, float, bool] | None, int, float | None, float, tuple[str, str]]
Reading = tuple[Plan, float, float, float]

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


def _fraction(now: datetime) -> str:
    """The fractional seconds of `now` as RFC 3339 writes them (msgspec: none when zero, else 6 digits trimmed)."""
    return f".{now.microsecond:06d}".rstrip("0") if now.microsecond else ""


def _sm_power(draw: tuple[float, float, bool] | None, gauss: Callable[[float, float], float]) -> tuple[float, float]:
    """One GPU's SM and power for a plan's draw (mean, sigma, folded at 0); an idle GPU (no draw) reads 0 % at 70 W."""
    if draw is None:
        return 0.0, 70.0
    mu, sigma, folded = draw
    sm = gauss(mu, sigma)
    if folded:
        sm = abs(sm)
    sm = min(max(sm, 0.0), 100.0)
    return round(sm, 1), round(70 + 6.3 * sm, 1)


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
        self._prefixes: list[str] | None = None
        self._job_spans: list[tuple[datetime, datetime, SimJob, str, list[int]]] | None = None
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

    def _plan(self, job: SimJob, job_json: str, elapsed_h: float, gpu_pos: int) -> Plan:
        """How GPU `gpu_pos` of `job` reads `elapsed_h` hours after the job started: the normal draw of its sm %
        (mean, deviation, folded at zero) or None (0 %), and its memory MiB, io wait % (None: drawn per reading,
        uniform in 25-45) and host cpu %, as records carry them (the job's profile decides); last, the JSON of
        those fields that do not change between its GPUs, up to io wait's value, for a GPU on NUMA node 0 and 1."""
        p = job.profile
        draw: tuple[float, float, bool] | None
        io: float | None
        if p == "busy":
            draw, mem, io, cpu = (88, 5, False), 0.70 * GPU_MEM_MIB, 2, 35
        elif p == "idle":
            draw, mem, io, cpu = None, 0.02 * GPU_MEM_MIB, 0, 2
        elif p == "bursty":
            on = math.sin(elapsed_h * 2 + job.phase) > 0.4
            draw, mem, io, cpu = ((70, 15, False) if on else None), 0.25 * GPU_MEM_MIB, 1, 10
        elif p == "memory_heavy":
            draw, mem, io, cpu = (30, 6, False), 0.95 * GPU_MEM_MIB, 3, 25
        elif p == "busy_then_idle":
            busy = elapsed_h < 1.0
            draw, mem, io, cpu = ((85, 5, False) if busy else None), 0.55 * GPU_MEM_MIB, 1, 20 if busy else 1
        elif p == "starved":
            draw, mem, io, cpu = (18, 14, True), 0.35 * GPU_MEM_MIB, None, 97
        elif p == "overallocated":
            works = gpu_pos < max(1, len(job.gpus) // 4)
            draw, mem, io, cpu = ((80, 6, False) if works else None), (0.6 if works else 0.01) * GPU_MEM_MIB, 2, 30
        else:  # small_inference
            draw, mem, io, cpu = (6, 2, True), 0.11 * GPU_MEM_MIB, 1, 8
        mem, cpu = round(min(mem, GPU_MEM_MIB)), round(min(cpu, 100), 1)
        tails = tuple(
            f'"mem_used_mib":{mem},"job_id":{job_json},'
            f'"job_cpu_numa_nodes":[{1 - numa if job.misaligned_numa else numa}],"host_cpu_util":{cpu!r},"io_wait":'
            for numa in (0, 1)
        )
        return job, draw, mem, None if io is None else round(io, 1), cpu, (tails[0], tails[1])

    def _spans(self) -> list[tuple[datetime, datetime, SimJob, str, list[int]]]:
        """Each job's start, end, id as JSON and GPU slots (node-major numbers), built once."""
        if self._job_spans is None:
            self._job_spans = [
                (
                    job.start,
                    job.end,
                    job,
                    json.dumps(job.job_id),
                    [node * GPUS_PER_NODE + index for node, index in job.gpus],
                )
                for job in self.jobs
            ]
        return self._job_spans

    def _holders(self, now: datetime) -> list[Plan | None]:
        """Per GPU slot, how it reads at `now` (the plan of the job holding it), or None: no job holds it."""
        held: list[Plan | None] = [None] * self.gpu_count
        for start, end, job, job_json, slots in self._spans():
            if start <= now < end:
                elapsed_h = (now - start).total_seconds() / 3600
                plan = self._plan(job, job_json, elapsed_h, 0)
                if job.profile == "overallocated":
                    rest = self._plan(job, job_json, elapsed_h, len(slots))
                    works = max(1, len(slots) // 4)
                    for pos, slot in enumerate(slots):
                        held[slot] = plan if pos < works else rest
                else:
                    for slot in slots:
                        held[slot] = plan
        return held

    def _readings(self, now: datetime) -> list[Reading | None]:
        """Every GPU's reading at `now` in slot order (None: no job holds it). The random draws are made in slot
        order, one GPU after another, so a cluster of a given seed reads the same whichever form is asked for."""
        gauss, uniform = self.rng.gauss, self.rng.uniform
        readings: list[Reading | None] = []
        append = readings.append
        for plan in self._holders(now):
            if plan is None:
                append(None)
                continue
            draw, io = plan[1], plan[3]
            sm, power = _sm_power(draw, gauss)
            append((plan, sm, power, round(uniform(25, 45), 1) if io is None else io))
        return readings

    def samples_at(self, now: datetime) -> Iterator[SampleRecord]:
        for slot, reading in enumerate(self._readings(now)):
            node, index = divmod(slot, GPUS_PER_NODE)
            gpu_numa = 0 if index < GPUS_PER_NODE // 2 else 1
            if reading is None:
                sm, mem, power, io, cpu, job_id, cpu_numa = 0.0, 0, 70.0, None, None, None, None
            else:
                (job, _, mem, _, cpu, _), sm, power, io = reading
                job_id = job.job_id
                cpu_numa = [1 - gpu_numa] if job.misaligned_numa else [gpu_numa]
            yield SampleRecord(
                cluster=self.cluster,
                node=self.node_name(node),
                gpu_uuid=self.gpu_uuid((node, index)),
                gpu_index=index,
                gpu_model=GPU_MODEL,
                ts=now,
                job_id=job_id,
                sm_util=sm,
                mem_used_mib=mem,
                mem_total_mib=GPU_MEM_MIB,
                power_w=power,
                gpu_numa_node=gpu_numa,
                job_cpu_numa_nodes=cpu_numa,
                io_wait=io,
                host_cpu_util=cpu,
            )

    def _sample_prefixes(self) -> list[str]:
        """Per GPU slot, the start of its sample's JSON object (the fields that never change), built once."""
        if self._prefixes is None:
            model = json.dumps(GPU_MODEL)
            self._prefixes = [
                f'{{"kind":"sample","cluster":{json.dumps(self.cluster)},'
                f'"node":{json.dumps(self.node_name(slot // GPUS_PER_NODE))},'
                f'"gpu_uuid":{json.dumps(self.gpu_uuid(divmod(slot, GPUS_PER_NODE)))},'
                f'"gpu_index":{slot % GPUS_PER_NODE},"gpu_model":{model},"mem_total_mib":{GPU_MEM_MIB!r},'
                f'"gpu_numa_node":{0 if slot % GPUS_PER_NODE < GPUS_PER_NODE // 2 else 1},"ts":'
                for slot in range(self.gpu_count)
            ]
        return self._prefixes

    def node_samples_json(self, now: datetime) -> list[bytes]:
        """One interval's samples as each node's agent would send them: per node, its GPUs' sample records as
        JSON objects joined by commas (the inside of a batch's `records` array). The same records as
        `samples_at(now)`, without building an object per sample: the fleet bench samples 100,000 GPUs a round."""
        prefixes = self._sample_prefixes()
        ts = json.dumps(now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S") + _fraction(now) + "Z")
        idle = f'{ts},"sm_util":0.0,"mem_used_mib":0,"power_w":70.0}}'
        numas = [0 if index < GPUS_PER_NODE // 2 else 1 for index in range(GPUS_PER_NODE)]
        gauss, uniform = self.rng.gauss, self.rng.uniform
        parts: list[str] = []
        append = parts.append
        # The draws of _readings, in the same order, written straight into the JSON.
        for slot, plan in enumerate(self._holders(now)):
            if plan is None:
                append(prefixes[slot] + idle)
                continue
            draw, io, tails = plan[1], plan[3], plan[5]
            sm, power = _sm_power(draw, gauss)
            if io is None:
                io = round(uniform(25, 45), 1)
            tail = tails[numas[slot % GPUS_PER_NODE]]
            append(f'{prefixes[slot]}{ts},"sm_util":{sm!r},"power_w":{power!r},{tail}{io!r}}}')
        return [
            ",".join(parts[first : first + GPUS_PER_NODE]).encode() for first in range(0, self.gpu_count, GPUS_PER_NODE)
        ]

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
