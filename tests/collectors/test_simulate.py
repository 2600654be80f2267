import hashlib
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import msgspec

from collectors.records import JobRecord, Record, SampleRecord, decode_line, encode
from collectors.simulate import SimulatedCluster
from tests.factories import at

ROOT = Path(__file__).resolve().parents[2]


def test_the_simulated_cluster_runs_jobs_of_several_teams_and_profiles():
    sim = SimulatedCluster(gpus=16, start=at("2026-11-01T00:00:00Z"), end=at("2026-11-08T00:00:00Z"))

    assert {j.team for j in sim.jobs} == {"nlp", "vision", "recsys"}
    assert {"busy", "idle", "bursty", "memory_heavy", "busy_then_idle"} <= {j.profile for j in sim.jobs}


def test_the_history_has_one_sample_per_gpu_per_interval():
    sim = SimulatedCluster(gpus=4, start=at("2026-11-01T00:00:00Z"), end=at("2026-11-01T01:00:00Z"))

    records = list(sim.history(timedelta(minutes=5)))

    kinds = Counter(type(r) for r in records)
    # From the start of the first job it reports (jobs already running at `start` began before it), on one grid.
    first = min(r.start_time for r in records if isinstance(r, JobRecord) and r.start_time)
    assert first < sim.start
    before = -((first - sim.start) // timedelta(minutes=5))
    assert kinds[SampleRecord] == 4 * (12 + before)
    stamps = sorted({r.ts for r in records if isinstance(r, SampleRecord)})
    assert stamps[0] <= first < stamps[0] + timedelta(minutes=5) and stamps[-1] == sim.end - timedelta(minutes=5)
    assert all(r.job_id in {j.job_id for j in sim.jobs} for r in records if isinstance(r, JobRecord))


def test_no_gpu_is_held_by_two_jobs_at_once_and_every_gpu_gets_work():
    sim = SimulatedCluster(gpus=24, start=at("2026-11-01T00:00:00Z"), end=at("2026-11-04T00:00:00Z"))

    by_slot: dict[tuple[int, int], list] = {}
    for job in sim.jobs:
        assert len(set(job.gpus)) == len(job.gpus)
        for slot in job.gpus:
            by_slot.setdefault(slot, []).append((job.start, job.end))
    assert set(by_slot) == {(i // 8, i % 8) for i in range(24)}
    for spans in by_slot.values():
        spans.sort()
        assert all(end <= next_start for (_, end), (next_start, _) in pairwise(spans))


def test_a_job_takes_the_gpus_free_first():
    sim = SimulatedCluster(gpus=16, start=at("2026-11-01T00:00:00Z"), end=at("2026-11-03T00:00:00Z"))

    # Replaying the jobs in order: at each job's layout no GPU it left out was free before one it took.
    free_at = {}
    for job in sim.jobs:
        taken = max(free_at.get(slot, sim.start - timedelta(days=1)) for slot in job.gpus)
        others = [t for slot, t in free_at.items() if slot not in job.gpus]
        assert len(free_at) < 16 or all(t >= taken for t in others)  # once every GPU's free time is known
        for slot in job.gpus:
            free_at[slot] = job.end


def test_the_same_seed_gives_the_same_cluster():
    a = SimulatedCluster(gpus=8, start=at("2026-11-01T00:00:00Z"), end=at("2026-11-03T00:00:00Z"), seed=3)
    b = SimulatedCluster(gpus=8, start=at("2026-11-01T00:00:00Z"), end=at("2026-11-03T00:00:00Z"), seed=3)

    assert [(j.job_id, j.start, j.profile) for j in a.jobs] == [(j.job_id, j.start, j.profile) for j in b.jobs]


def test_the_command_line_prints_valid_records_in_dry_run():
    result = subprocess.run(
        [sys.executable, "-m", "collectors", "--source", "simulate", "--gpus", "8", "--once", "--dry-run"],
        cwd=ROOT, capture_output=True, check=True,
    )  # fmt: skip

    records = [r for line in result.stdout.splitlines() for r in decode_line(line)]
    assert sum(isinstance(r, SampleRecord) for r in records) == 8


def test_a_nodes_samples_as_json_are_the_records_samples_at_gives():
    """The fleet bench's form (one JSON fragment per node, no object per sample) reads the same as the records,
    interval after interval (both forms draw from the cluster's generator in the same order)."""
    records = SimulatedCluster(gpus=40, start=at("2026-11-01T00:00:00Z"), end=at("2026-11-03T00:00:00Z"), seed=5)
    as_json = SimulatedCluster(gpus=40, start=at("2026-11-01T00:00:00Z"), end=at("2026-11-03T00:00:00Z"), seed=5)
    decoder = msgspec.json.Decoder(list[Record])

    for minutes in range(0, 48 * 60, 41):
        now = records.start + timedelta(minutes=minutes, seconds=0.25 * (minutes % 2))
        nodes = as_json.node_samples_json(now)
        assert len(nodes) == 5
        assert [r for node in nodes for r in decoder.decode(b"[" + node + b"]")] == list(records.samples_at(now))


def test_the_same_seed_gives_the_same_readings():
    """A digest of a cluster's samples at fixed times: the readings of a seed stay what they were (the demo data
    and the benches' workloads do not move when the simulator is made faster)."""
    sim = SimulatedCluster(gpus=24, start=at("2026-11-01T00:00:00Z"), end=at("2026-11-03T00:00:00Z"), seed=5)
    digest = hashlib.sha256()

    for minutes in range(0, 48 * 60, 37):
        for record in sim.samples_at(sim.start + timedelta(minutes=minutes)):
            digest.update(encode(record))

    assert digest.hexdigest() == "e747ab253131aced946c3ccd53978b3affac9ab970013f473f65205c781e2aaf"
