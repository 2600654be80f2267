"""What the fleet load test watches while it runs (benchmarks/fleet.py): the backlog, when each interval's samples
are charged, the pages a reader opens over HTTP, and the CPU time of the web, the workers and PostgreSQL.

The watcher and the reader run in threads of their own, each with its own database connection.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from django.db import connection

from benchmarks.pipeline import Pipeline

TICK_S = 0.5  # how often the watcher reads the backlog
CPU_EVERY_TICKS = 2
READER_PAUSE_S = 0.5  # between two pages the reader opens
PAGE_TIMEOUT_S = 120
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

BACKLOG = """
SELECT (SELECT count(*) FROM usage_ingestbatch WHERE processed_at IS NULL AND dead_at IS NULL),
       (SELECT count(*) FROM usage_ingestbatch WHERE dead_at IS NOT NULL),
       (SELECT count(*) FROM usage_pricingmark), (SELECT min(created_at) FROM usage_pricingmark)
"""
INTERVAL_BATCHES = """
SELECT count(*), count(processed_at), max(processed_at) FROM usage_ingestbatch WHERE batch_id >= %s AND batch_id < %s
"""


def batch_id(run_tag: int, interval: int, node: int) -> uuid.UUID:
    """A batch's id: the run, the interval and the node in its bits, so one interval's batches are one range."""
    return uuid.UUID(int=(run_tag << 96) | (interval << 64) | node)


@dataclass
class Tick:
    at: float  # time.monotonic()
    unsent: int  # batches the agents have not got through the web yet
    unprocessed: int  # stored, not yet processed by an ingest worker
    dead: int
    marks: int  # pricing marks pending


@dataclass
class Interval:
    number: int
    due: float  # time.monotonic() when its samples were taken (the simulated clock at its timestamp)
    batches: int
    sent_at: float  # time.monotonic() when its batches were handed to the agents' posting (due, or later)
    charged_at: float | None = None


def _cpu_ticks(pid: int) -> int | None:
    """utime + stime of a process, in clock ticks (/proc/<pid>/stat), or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def _children(roots: set[int]) -> set[int]:
    """`roots` and every process below them."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    found = set(roots)
    grew = True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in found} - found
        grew = bool(below)
        found |= below
    return found


@dataclass
class CpuShare:
    """CPU seconds per part of the box, from /proc: per process the growth of utime + stime since it was first
    seen (a process seen for the first time after the start counts from zero, it started during the load)."""

    first: dict[int, int] = field(default_factory=dict)
    last: dict[int, int] = field(default_factory=dict)
    part_of: dict[int, str] = field(default_factory=dict)
    started: bool = False
    busy: list[int] = field(default_factory=list)  # the whole machine's busy ticks (/proc/stat), first and last
    # Every reading: when (time.monotonic()), and the ticks so far of the machine and of each part's processes.
    timeline: list[tuple[float, dict[str, int]]] = field(default_factory=list)

    def read(self, parts: dict[str, set[int]]) -> None:
        self.busy[1:] = [_busy_ticks()]
        if len(self.busy) == 1:
            self.busy.append(self.busy[0])
        now: dict[str, int] = {"machine": self.busy[-1]}
        for part, pids in parts.items():
            for pid in pids:
                ticks = _cpu_ticks(pid)
                if ticks is None:
                    continue
                self.part_of.setdefault(pid, part)
                self.first.setdefault(pid, ticks if not self.started else 0)
                self.last[pid] = max(ticks, self.last.get(pid, 0))
                now[part] = now.get(part, 0) + ticks
        self.timeline.append((time.monotonic(), now))
        self.started = True

    def cores_during(self, start: float, end: float) -> dict[str, float]:
        """Cores each part (and the whole machine) kept busy from the last reading at or before `start` to the first
        at or after `end` ({} where the readings do not span it)."""
        before = [reading for reading in self.timeline if reading[0] <= start]
        after = [reading for reading in self.timeline if reading[0] >= end]
        if not before or not after or after[0][0] <= before[-1][0]:
            return {}
        (t0, first), (t1, last) = before[-1], after[0]
        return {part: max(0, last[part] - first.get(part, 0)) / CLOCK_TICKS / (t1 - t0) for part in last}

    def seconds(self) -> dict[str, float]:
        """CPU seconds per part, and under `machine` those of everything the machine ran (other users' too)."""
        spent: dict[str, float] = {}
        for pid, part in self.part_of.items():
            spent[part] = spent.get(part, 0.0) + (self.last[pid] - self.first[pid]) / CLOCK_TICKS
        if self.busy:
            spent["machine"] = (self.busy[-1] - self.busy[0]) / CLOCK_TICKS
        return spent


def _busy_ticks() -> int:
    """Clock ticks all CPUs spent on anything but idle and iowait since boot (/proc/stat)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields[:8]) - fields[3] - fields[4]  # user..steal, less idle and iowait


class Probe:
    """Watches a running load: call interval_started() as each interval's batches go out, posted() as each is
    through the web, stop() at the end; the readings are then in ticks, intervals, pages and cpu."""

    def __init__(self, pipeline: Pipeline, *, run_tag: int, pages: dict[str, str], cookie: str) -> None:
        self.pipeline = pipeline
        self.run_tag = run_tag
        self.pages = pages
        self.cookie = cookie
        self.ticks: list[Tick] = []
        self.intervals: list[Interval] = []
        self.page_ms: dict[str, list[float]] = {name: [] for name in pages}
        self.page_errors: list[str] = []
        self.page_views: list[tuple[str, float, float]] = []  # each page read: its name, start and end (monotonic)
        self.cpu = CpuShare()
        self.database = connection.settings_dict["NAME"]
        self._queued = 0
        self._sent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._watch, daemon=True), threading.Thread(target=self._read)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=PAGE_TIMEOUT_S + 10)

    def interval_started(self, number: int, due: float, batches: int) -> None:
        with self._lock:
            self._queued += batches
            self.intervals.append(Interval(number=number, due=due, batches=batches, sent_at=time.monotonic()))

    def posted(self, batches: int, post: Future) -> None:
        """`batches` POSTs are done (the done callback of their future; cancelled, they were never sent)."""
        if post.cancelled():
            return
        with self._lock:
            self._sent += batches

    def abandon(self, batches: int) -> None:
        """Batches that will not be posted (the load stopped early)."""
        with self._lock:
            self._queued -= batches

    def posts_settled(self, sent: dict[int, int]) -> None:
        """Every POST is done: `sent` batches of each interval went out (all, unless the load stopped early); an
        interval none of whose batches went out was never sent."""
        with self._lock:
            for interval in self.intervals:
                interval.batches = sent.get(interval.number, 0)
            self.intervals[:] = [interval for interval in self.intervals if interval.batches]

    @property
    def last(self) -> Tick | None:
        return self.ticks[-1] if self.ticks else None

    def uncharged(self) -> list[Interval]:
        return [interval for interval in self.intervals if interval.charged_at is None]

    def _parts(self) -> dict[str, set[int]]:
        """Process ids per part: `web_agents` (the gunicorn pool the agents POST to), `web_pages` (the readers', where
        it has its own), `workers_<queue>`, `postgres` (the bench database's backends) and `agents`."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [self.database])
            backends = {pid for (pid,) in cursor.fetchall()}
        parts: dict[str, set[int]] = {}
        for role, process in zip(self.pipeline.roles, self.pipeline.processes, strict=True):
            part = {"web": "web_agents", "pages": "web_pages"}.get(role, f"workers_{role}")
            parts.setdefault(part, set()).update(_children({process.pid}))
        ours = set().union(*parts.values())
        # This process (it makes the agents' batches, reads pages and watches) and the agents' posting processes.
        return {**parts, "postgres": backends, "agents": _children({os.getpid()}) - ours}

    def _watch(self) -> None:
        try:
            count = 0
            while not self._stop.is_set():
                self._tick()
                if count % CPU_EVERY_TICKS == 0:
                    self.cpu.read(self._parts())
                count += 1
                self._stop.wait(TICK_S)
            self._tick()
            self.cpu.read(self._parts())
        finally:
            connection.close()

    def _tick(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute(BACKLOG)
            unprocessed, dead, marks, oldest_mark = cursor.fetchone()
            for interval in self.uncharged():
                if not self._charged(cursor, interval, oldest_mark):
                    break
        with self._lock:
            unsent = self._queued - self._sent
        self.ticks.append(Tick(time.monotonic(), unsent, unprocessed, dead, marks))

    def _charged(self, cursor, interval: Interval, oldest_mark: datetime | None) -> bool:
        """Whether the interval's samples are charged: all its batches processed, and no pricing mark left that
        was made before the last of them was (marks are deleted by the pricing pass that writes the charges)."""
        low, high = batch_id(self.run_tag, interval.number, 0), batch_id(self.run_tag, interval.number + 1, 0)
        cursor.execute(INTERVAL_BATCHES, [low, high])
        stored, processed, last_processed = cursor.fetchone()
        if stored < interval.batches or processed < interval.batches:
            return False
        if oldest_mark is not None and oldest_mark <= last_processed:
            return False
        interval.charged_at = time.monotonic()
        return True

    def _read(self) -> None:
        while not self._stop.is_set():
            for name, path in self.pages.items():
                if self._stop.is_set():
                    return
                self._open(name, path)
                self._stop.wait(READER_PAUSE_S)

    def _open(self, name: str, path: str) -> None:
        url = f"{self.pipeline.page_url}{path}"
        request = urllib.request.Request(url, headers={"Cookie": self.cookie})  # noqa: S310
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=PAGE_TIMEOUT_S) as response:  # noqa: S310 - loopback
                response.read()
                status = response.status
                if response.geturl() != url:  # sent to the login page: the page itself was not read
                    self.page_errors.append(f"{name}: redirected to {response.geturl()}")
                    return
        except urllib.error.HTTPError as error:
            status = error.code
        except OSError as error:
            self.page_errors.append(f"{name}: {error}")
            return
        if status != 200:
            self.page_errors.append(f"{name}: HTTP {status}")
            return
        spent, ended = time.perf_counter() - started, time.monotonic()
        self.page_ms[name].append(spent * 1000)
        self.page_views.append((name, ended - spent, ended))
