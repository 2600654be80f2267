"""The fleet load test (`make bench ONLY=fleet GPUS=...`): a simulated fleet sampled and priced as it runs, in
compressed time, while a reader opens pages.

Each node's agent (8 GPUs a node, collectors/simulate.py) POSTs one batch per sampling interval, with the job
records it has news of, through a real gunicorn web tier (benchmarks/pipeline.py) to real Celery ingest workers;
an analysis worker prices after every batch (the ingest task enqueues it) and runs the pricing and findings
passes that beat schedules, sent here on the simulated clock. Meanwhile one reader opens the overview, a team's
month, the finance month and the cluster heatmap over HTTP, one after another. The simulated window ends at the
real now, so every sample is in the past, as ingest requires.

Sized by the environment: FLEET_GPUS (default 100,000; the Makefile passes GPUS), FLEET_INTERVAL_S (sampling,
60), FLEET_COMPRESSION (simulated seconds per real second, 10), FLEET_HOURS (simulated, 2). FLEET_ANALYSIS_NICE
is the analysis worker's CPU priority (`nice -n`; 10 by default, as docker-compose.yml runs it), and
FLEET_ANALYSIS_PARALLEL its database sessions' max_parallel_workers_per_gather (unset: PostgreSQL's own). Figures,
named fleet_<gpus/1000>k_<interval>s_* (fleet_100k_60s_*), analysis_nice and analysis_parallel first:
- backlog_at_<minute>: batches not yet processed (unsent by the agents + stored, not processed) and pricing marks
  pending at that simulated minute, as an interval ends (just before the next one's batches go out); backlog_max,
  marks_max, and backlog_final once the load stopped and drained;
- lag_p50_s, lag_p95_s: sample-to-charge lag in simulated seconds, from an interval's timestamp to the moment all
  its batches were processed and no pricing mark made before the last of them was left (the pass that deletes a
  mark writes its charges in the same transaction); intervals_uncharged: those never charged before the end;
- interval_build_s_p50 / _max, interval_build_cpu_s_p50 / _max: wall and CPU seconds (this thread's) to make one
  interval's batches (the posting threads and the watcher share this process, and the machine may be shared);
- page_<page>_p50_ms / _p95_ms under load, page_p95_ms the worst of them, page_errors;
- share_web, share_workers, share_postgres (its backends on the bench database), share_agents (this process):
  CPU seconds over wall seconds x cores, from /proc; share_box the first three together; machine_busy: the same
  for everything the machine ran (on a shared box, the others' load too); share_web_agents and share_web_pages
  split the web between the agents' gunicorn pool and the readers' (FLEET_PAGE_WORKERS workers of its own; 0, the
  default, as docker-compose.yml serves both from one `web`: the reader uses the agents' pool), share_workers_ingest
  and share_workers_analysis the workers by queue;
- page_slow_views: the views slower than their page's p95; page_slow_<part>_cores and page_rest_<part>_cores: the
  cores the machine, the analysis worker and PostgreSQL kept busy during those views and during the others (from
  the CPU readings, a second apart, that span each view);
- sustained: yes when the batches of every interval were all processed before the next interval's were sent
  and the run was not stopped early. A load the box cannot keep up with stops early (stopped_early says why)
  once its backlog passes DIVERGED_INTERVALS intervals' worth of batches or its oldest uncharged interval is
  DIVERGED_LAG_S simulated seconds old, rather than running on for ever.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import random
import statistics
import time
import warnings
from collections import Counter, defaultdict
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial
from itertools import pairwise

from celery.exceptions import AlwaysEagerIgnored
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.test import override_settings

from benchmarks import fleet_agents
from benchmarks.fleet_probe import Probe, batch_id
from benchmarks.harness import BenchError, Out
from benchmarks.pipeline import INGEST_WORKERS, Pipeline, pipeline_started
from collectors.records import encode
from collectors.simulate import GPU_MODEL, GPUS_PER_NODE, TEAMS, SimulatedCluster
from governance.api.services import api_token_create
from governance.celery import app as celery_app
from governance.costs.models import RateCard
from governance.lib.months import Month
from governance.org.models import Project, Team, User
from governance.usage.models import Sample

CLUSTER = "fleet"
ANALYSIS_WORKERS = int(os.environ.get("FLEET_ANALYSIS_WORKERS", "1"))
# The analysis worker's niceness (`nice -n`), 10 as docker-compose.yml runs it; 0: the web's and ingest's priority.
ANALYSIS_NICE = int(os.environ.get("FLEET_ANALYSIS_NICE", "10"))
# max_parallel_workers_per_gather for the analysis worker's database sessions; unset: PostgreSQL's own setting.
ANALYSIS_PARALLEL = int(os.environ["FLEET_ANALYSIS_PARALLEL"]) if os.environ.get("FLEET_ANALYSIS_PARALLEL") else None
# Pages from a gunicorn pool of their own, of this many workers; 0 (docker-compose.yml's one `web` service): the
# reader opens pages on the pool the agents POST to.
PAGE_WORKERS = int(os.environ.get("FLEET_PAGE_WORKERS", "0"))
POSTERS = 2 * INGEST_WORKERS  # agents posting at once: as many as the web tier serves, and as many waiting
AGENT_CHUNK = 25  # batches one posting process is handed at a time (one by one, the handing over cost as much)
DIVERGED_INTERVALS = 3
DIVERGED_LAG_S = 1800
DRAIN_S = 180  # after the last interval, the longest wait for the backlog to clear (real seconds)
BACKLOG_LINES = 24  # backlog_at_<minute> lines printed, about
# The periodic passes beat runs (governance/conf/celery.py), by simulated seconds.
BEAT = {"costs.reprice": 60, "costs.reprice_running": 300, "efficiency.evaluate_running": 900,
        "efficiency.evaluate_ended": 300}  # fmt: skip


@dataclass(frozen=True)
class FleetSize:
    gpus: int = 100_000
    interval_s: int = 60
    compression: float = 10.0
    hours: float = 2.0

    @classmethod
    def from_env(cls) -> FleetSize:
        env = os.environ
        size = cls(
            gpus=int(env.get("FLEET_GPUS") or cls.gpus), interval_s=int(env.get("FLEET_INTERVAL_S") or cls.interval_s),
            compression=float(env.get("FLEET_COMPRESSION") or cls.compression),
            hours=float(env.get("FLEET_HOURS") or cls.hours),
        )  # fmt: skip
        for name, value in (("FLEET_GPUS", size.gpus), ("FLEET_INTERVAL_S", size.interval_s),
                            ("FLEET_COMPRESSION", size.compression), ("FLEET_HOURS", size.hours)):  # fmt: skip
            if value <= 0:
                raise BenchError(f"{name}: must be above 0, not {value}")
        return size

    @property
    def prefix(self) -> str:
        gpus = f"{self.gpus // 1000}k" if self.gpus % 1000 == 0 else f"{self.gpus}gpu"
        return f"fleet_{gpus}_{self.interval_s}s"

    @property
    def intervals(self) -> int:
        return max(1, int(self.hours * 3600 // self.interval_s))

    @property
    def real_interval_s(self) -> float:
        return self.interval_s / self.compression


def run(out: Out) -> None:
    bench_fleet(out, FleetSize.from_env())


def bench_fleet(out: Out, size: FleetSize) -> None:
    with pipeline_started(
        analysis_workers=ANALYSIS_WORKERS, analysis_nice=ANALYSIS_NICE, analysis_parallel=ANALYSIS_PARALLEL,
        page_workers=PAGE_WORKERS,
    ) as pipeline:  # fmt: skip
        if pipeline is None:
            raise BenchError("the fleet bench runs web and worker processes: set CELERY_BROKER_URL")
        out(f"{size.prefix}_analysis_nice", ANALYSIS_NICE)
        out(f"{size.prefix}_analysis_parallel", "default" if ANALYSIS_PARALLEL is None else ANALYSIS_PARALLEL)
        _bench(out, size, pipeline)


def _setup(secret_key: str) -> tuple[str, str]:
    """Rates, the simulator's teams and projects (ingest never creates them), an ingest token, and the session
    cookie of an admin who reads the pages (signed with the web's `secret_key`)."""
    RateCard.objects.create(
        gpu_model=GPU_MODEL, price_per_gpu_hour=Decimal("2.50"), valid_from=datetime(2020, 1, 1, tzinfo=UTC)
    )
    for team, projects in TEAMS.items():
        owner = Team.objects.create(slug=team, name=team)
        for project, _ in projects:
            Project.objects.create(slug=project, name=project, team=owner)
    admin = User.objects.create_user("fleet-admin", role=User.Role.ADMIN)
    token = api_token_create(user=admin, name="fleet", scope="ingest", clusters=[CLUSTER])[1]
    reader = User.objects.create_user("fleet-reader", role=User.Role.ADMIN)
    with override_settings(SECRET_KEY=secret_key):
        session = importlib.import_module(settings.SESSION_ENGINE).SessionStore()
        session[SESSION_KEY] = str(reader.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = reader.get_session_auth_hash()
        session.create()
    return token, f"{settings.SESSION_COOKIE_NAME}={session.session_key}"


def _bodies(sim: SimulatedCluster, now: datetime, previous: datetime | None, run_tag: int, number: int) -> list[bytes]:
    """One interval's batches, one per node: its GPUs' samples, after the records of the jobs it has news of
    (running when the agents start, started or ended since the last interval), sent by the node of their first GPU.
    """
    news: dict[int, list[bytes]] = defaultdict(list)
    for job in sim.jobs:
        if (
            (previous is None and job.start <= now < job.end)
            or (previous is not None and previous < job.start <= now)
            or (previous is not None and previous < job.end <= now)
        ):
            news[job.gpus[0][0]].append(encode(job.record(sim.cluster, now)))
    bodies = []
    for node, samples in enumerate(sim.node_samples_json(now)):
        head = f'{{"batch_id":"{batch_id(run_tag, number, node)}","collector":"sim@{sim.node_name(node)}","records":['
        records = b",".join([*news.get(node, []), samples])
        bodies.append(head.encode() + records + b"]}")
    return bodies


def _diverged(probe: Probe, size: FleetSize, nodes: int, number: int) -> str | None:
    tick = probe.last
    if tick is None:
        return None
    backlog = tick.unsent + tick.unprocessed
    if backlog > DIVERGED_INTERVALS * nodes:
        return f"{backlog} batches behind after interval {number + 1} of {size.intervals}"
    uncharged = probe.uncharged()
    if uncharged:
        behind = (time.monotonic() - uncharged[0].due) * size.compression
        if behind > DIVERGED_LAG_S:
            return f"interval {uncharged[0].number + 1} uncharged {behind:.0f} simulated s after its samples"
    return None


def _bench(out: Out, size: FleetSize, pipeline: Pipeline) -> None:
    prefix = size.prefix
    token, cookie = _setup(pipeline.secret_key)
    end = datetime.fromtimestamp(time.time() // size.interval_s * size.interval_s, UTC)
    start = end - timedelta(seconds=size.intervals * size.interval_s)
    started = time.perf_counter()
    sim = SimulatedCluster(cluster=CLUSTER, gpus=size.gpus, start=start, end=end)
    out(f"{prefix}_layout_s", round(time.perf_counter() - started, 2))
    nodes = -(-size.gpus // GPUS_PER_NODE)
    month = Month.of(end - timedelta(seconds=1))
    pages = {
        "overview": "/", "team_month": f"/costs/team/nlp/?month={month}", "finance_month": f"/costs/?month={month}",
        "heatmap": f"/cluster/?month={month}&cluster={CLUSTER}",
    }  # fmt: skip
    run_tag = random.getrandbits(32)
    probe = Probe(pipeline, run_tag=run_tag, pages=pages, cookie=cookie)
    built: list[tuple[float, float]] = []  # per interval, the wall and CPU seconds its batches took to make
    posts: list[tuple[int, int, int, Future]] = []  # interval, batches, samples, their POSTs
    stopped: str | None = None
    beat_sent: dict[str, datetime] = {}
    probe.start()
    real_start = time.monotonic()
    try:
        with ProcessPoolExecutor(max_workers=POSTERS, mp_context=multiprocessing.get_context("spawn")) as posters:
            previous: datetime | None = None
            for number in range(size.intervals):
                now = start + timedelta(seconds=number * size.interval_s)
                due = real_start + number * size.real_interval_s
                while time.monotonic() < due:
                    pipeline.check()
                    time.sleep(min(0.05, max(0.0, due - time.monotonic())))
                began, began_cpu = time.perf_counter(), time.thread_time()
                bodies = _bodies(sim, now, previous, run_tag, number)
                built.append((time.perf_counter() - began, time.thread_time() - began_cpu))
                probe.interval_started(number, due, len(bodies))
                for first in range(0, len(bodies), AGENT_CHUNK):
                    chunk = bodies[first : first + AGENT_CHUNK]
                    post = posters.submit(fleet_agents.post_all, pipeline.url, token, chunk)
                    post.add_done_callback(partial(probe.posted, len(chunk)))
                    samples = min(size.gpus, (first + len(chunk)) * GPUS_PER_NODE) - first * GPUS_PER_NODE
                    posts.append((number, len(chunk), samples, post))
                for task, every_s in BEAT.items():
                    if task not in beat_sent or (now - beat_sent[task]).total_seconds() >= every_s:
                        with warnings.catch_warnings():  # the tests run tasks eagerly; these go to the workers
                            warnings.simplefilter("ignore", AlwaysEagerIgnored)
                            celery_app.send_task(task)
                        beat_sent[task] = now
                previous = now
                stopped = _diverged(probe, size, nodes, number)
                if stopped:
                    break
            if stopped:
                probe.abandon(sum(batches for _, batches, _, post in posts if post.cancel()))
        sent = [(number, batches, samples, post) for number, batches, samples, post in posts if not post.cancelled()]
        settled: Counter[int] = Counter()
        for number, batches, _, _ in sent:
            settled[number] += batches
        probe.posts_settled(settled)
        samples_sent = sum(samples for _, _, samples, _ in sent)
        failed = [post.exception() for _, _, _, post in sent if post.exception()]
        if failed:
            raise RuntimeError(f"{len(failed)} batches were refused: {failed[0]}")
        loaded = time.monotonic()
        _drain(probe, pipeline, loaded + DRAIN_S)
    finally:
        probe.stop()
    _figures(out, size, probe, stopped=stopped, built=built, samples=samples_sent, wall=time.monotonic() - real_start)


def _drain(probe: Probe, pipeline: Pipeline, deadline: float) -> None:
    """Wait for the backlog to clear and every interval posted to be charged, until `deadline`."""
    while time.monotonic() < deadline:
        pipeline.check()
        tick = probe.last
        if tick and not tick.unsent and not tick.unprocessed and not tick.marks and not probe.uncharged():
            return
        time.sleep(0.2)


def _percentile(values: list[float], share: float) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[round(share * 100) - 1]


def _figures(
    out: Out,
    size: FleetSize,
    probe: Probe,
    *,
    stopped: str | None,
    built: list[tuple[float, float]],
    samples: int,
    wall: float,
) -> None:
    prefix = size.prefix
    ticks, intervals = probe.ticks, probe.intervals
    for name, value in (("gpus", size.gpus), ("nodes", -(-size.gpus // GPUS_PER_NODE)),
                        ("interval_s", size.interval_s), ("compression", size.compression),
                        ("simulated_hours", size.hours), ("intervals_planned", size.intervals),
                        ("intervals_posted", len(intervals))):  # fmt: skip
        out(f"{prefix}_{name}", value)
    out(f"{prefix}_stopped_early", f"yes: {stopped}" if stopped else "no")
    for kind, column in (("s", 0), ("cpu_s", 1)):
        spent = [each[column] for each in built]
        out(f"{prefix}_interval_build_{kind}_p50", round(statistics.median(spent), 3) if spent else 0)
        out(f"{prefix}_interval_build_{kind}_max", round(max(spent), 3) if spent else 0)
    posted = sum(interval.batches for interval in intervals)
    out(f"{prefix}_batches_posted", posted)
    out(f"{prefix}_samples_posted", samples)
    out(f"{prefix}_samples_written", Sample.objects.count())
    every = max(1, len(intervals) // BACKLOG_LINES)
    for interval, ends in list(zip(intervals, _ends(probe, size), strict=True))[::every]:
        # As the interval ends, just before the next one's batches go out.
        seen = [tick for tick in ticks if tick.at <= ends]
        if seen:
            tick, minute = seen[-1], round((interval.number + 1) * size.interval_s / 60, 1)
            backlog = f"{tick.unsent} unsent + {tick.unprocessed} unprocessed batches, {tick.marks} marks"
            out(f"{prefix}_backlog_at_{minute:g}min", backlog)
    out(f"{prefix}_backlog_max", max((t.unsent + t.unprocessed for t in ticks), default=0))
    out(f"{prefix}_marks_max", max((t.marks for t in ticks), default=0))
    final = ticks[-1] if ticks else None
    out(f"{prefix}_backlog_final", f"{final.unsent + final.unprocessed} batches, {final.marks} marks" if final else "-")
    out(f"{prefix}_batches_dead", final.dead if final else 0)
    lags = [(i.charged_at - i.due) * size.compression for i in intervals if i.charged_at is not None]
    out(f"{prefix}_intervals_uncharged", len(intervals) - len(lags))
    out(f"{prefix}_lag_p50_s", round(_percentile(lags, 0.50)))
    out(f"{prefix}_lag_p95_s", round(_percentile(lags, 0.95)))
    worst = 0.0
    for page, times in probe.page_ms.items():
        out(f"{prefix}_page_{page}_n", len(times))
        out(f"{prefix}_page_{page}_p50_ms", round(_percentile(times, 0.50)))
        worst = max(worst, _percentile(times, 0.95))
        out(f"{prefix}_page_{page}_p95_ms", round(_percentile(times, 0.95)))
    out(f"{prefix}_page_p95_ms", round(worst))
    _slow_views(out, prefix, probe)
    out(f"{prefix}_page_errors", len(probe.page_errors) and f"{len(probe.page_errors)} ({probe.page_errors[0]})")
    cores = os.cpu_count() or 1
    cpu = probe.cpu.seconds()
    split = {part: seconds for part, seconds in cpu.items() if part.startswith(("web_", "workers_"))}
    parts = {kind: sum(s for part, s in split.items() if part.startswith(f"{kind}_")) for kind in ("web", "workers")}
    parts["postgres"] = cpu.get("postgres", 0.0)
    for part, seconds in {**parts, "agents": cpu.get("agents", 0.0), **split}.items():
        out(f"{prefix}_share_{part}", round(seconds / (wall * cores), 3))
    out(f"{prefix}_share_box", round(sum(parts.values()) / (wall * cores), 3))
    out(f"{prefix}_machine_busy", round(cpu.get("machine", 0.0) / (wall * cores), 3))
    out(f"{prefix}_wall_s", round(wall, 1))
    out(f"{prefix}_sustained", "yes" if not stopped and _every_interval_drained(probe) else "no")


def _slow_views(out: Out, prefix: str, probe: Probe) -> None:
    """What the box was doing while a page was slow: the cores the machine, the analysis worker and PostgreSQL kept
    busy during the views above their page's p95, against during the others."""
    slowest = {page: _percentile(times, 0.95) for page, times in probe.page_ms.items()}
    cores: dict[str, list[dict[str, float]]] = {"slow": [], "rest": []}
    for name, start, end in probe.page_views:
        during = probe.cpu.cores_during(start, end)
        if during:
            cores["slow" if (end - start) * 1000 > slowest[name] else "rest"].append(during)
    out(f"{prefix}_page_slow_views", len(cores["slow"]))
    for part, label in (("machine", "machine"), ("workers_analysis", "analysis"), ("postgres", "postgres")):
        for kind, views in cores.items():
            mean = statistics.fmean(v.get(part, 0.0) for v in views) if views else 0.0
            out(f"{prefix}_page_{kind}_{label}_cores", round(mean, 2))


def _ends(probe: Probe, size: FleetSize) -> list[float]:
    """When each interval ends: the next one's batches go out, or (the last) one real interval after its own."""
    intervals = probe.intervals
    return [following.sent_at for following in intervals[1:]] + [
        i.sent_at + size.real_interval_s for i in intervals[-1:]
    ]


def _every_interval_drained(probe: Probe) -> bool:
    """Whether the batch backlog was back to zero after each interval, before the next one's batches went out."""
    intervals = probe.intervals
    for interval, following in pairwise(intervals):
        window = [t for t in probe.ticks if interval.sent_at < t.at <= following.sent_at]
        if not any(t.unsent == 0 and t.unprocessed == 0 for t in window):
            return False
    return True
