"""The pieces of the fault tests (tests/usage/test_recovery.py): a Redis and a PostgreSQL cluster each test starts
and stops itself (never the shared ones), the web under gunicorn and a real Celery worker (with beat) as processes,
and batches whose samples are counted exactly."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from tests.factories import at, iso, job_record, sample_record

ROOT = Path(__file__).resolve().parents[2]
PG_BINS = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
WORKER_APP = "fault-test-worker"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds it took for `predicate` to hold; fails after `timeout`."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.1)
    return time.monotonic() - started


def batch(n: int, *, samples: int = 3000) -> tuple[bytes, int]:
    """Batch n: one job and `samples` samples of its own GPU, one a second (no two batches share a sample)."""
    start = at("2026-11-03T09:00:00Z")
    gpu = f"GPU-fault-{n:04d}"
    records = [job_record(job_id=f"fault-{n}", start_time=iso(start))]
    records += [
        sample_record(node=f"fault-{n}", gpu_uuid=gpu, job_id=f"fault-{n}", ts=iso(start + timedelta(seconds=s)))
        for s in range(samples)
    ]
    body = json.dumps({"batch_id": str(uuid.uuid4()), "collector": "fault-test", "records": records}).encode()
    return body, samples


class Process:
    """A child process in its own session, so that a kill takes the whole process tree."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path) -> None:
        self.command, self.env, self.log = command, env, log
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                self.command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def kill(self) -> None:
        """SIGKILL to every process of the tree at once: no handler runs, nothing is acknowledged."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


class RedisServer:
    def __init__(self, folder: Path) -> None:
        self.port, self.folder = free_port(), folder
        folder.mkdir(parents=True, exist_ok=True)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.server = Process([*command, "--dir", str(folder)], dict(os.environ), folder / "redis.log")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def start(self) -> None:
        self.server.start()
        wait_until(self.ping, 10, "redis started")

    def stop(self) -> None:
        self.server.stop()


class PostgresCluster:
    """A throwaway PostgreSQL cluster on a free port, run as the `postgres` OS user when the tests run as root."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="gg-fault-pg-", dir="/tmp"))
        self.port = free_port()
        self.data = self.folder / "data"
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/governance"
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres")
        self._as_owner("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")

    def _as_owner(self, tool: str, *args: str) -> None:
        command = [str(PG_BINS[-1] / tool), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        self._as_owner("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "log"), "-o", options, "-w", "start")

    def stop(self, mode: str = "immediate") -> None:
        self._as_owner("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def load(self, source_url: str) -> None:
        """Create the database as a copy of `source_url`'s (schema and rows)."""
        psql = str(PG_BINS[-1] / "psql")
        admin = self.url.rsplit("/", 1)[0] + "/postgres"
        subprocess.run([psql, admin, "-qc", "CREATE DATABASE governance"], check=True, capture_output=True)
        dump = subprocess.run(
            [str(PG_BINS[-1] / "pg_dump"), "--no-owner", "--no-privileges", source_url],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        subprocess.run(
            [psql, "-q", "-v", "ON_ERROR_STOP=1", self.url], input=dump.stdout, check=True, capture_output=True
        )

    def remove(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.folder, ignore_errors=True)


def app_env(database_url: str, broker_url: str, folder: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker_url,
        "VAR_DIR": str(folder),
        "DEBUG": "1",
        "LOG_LEVEL": "WARNING",
        "CELERY_TRACE_LOG_LEVEL": "INFO",  # each retry in the worker log
    }


class Web:
    """gunicorn serving the app, as production runs it."""

    def __init__(self, database_url: str, broker_url: str, folder: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "gunicorn", "governance.wsgi:application", "--bind", f"127.0.0.1:{self.port}"]
        command += ["--workers", "1", "--threads", "4"]
        self.server = Process(command, app_env(database_url, broker_url, folder), folder / "web.log")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/healthz", timeout=1) as response:  # noqa: S310 - ours
                return response.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def start(self) -> None:
        self.server.start()
        wait_until(self.healthy, 60, "web started")

    def post(self, body: bytes, token: str) -> tuple[int, float]:
        """(status, seconds) of one ingest POST."""
        request = urllib.request.Request(  # noqa: S310 - the test's own server
            self.url + "/api/v1/ingest/", data=body, method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )  # fmt: skip
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        return status, time.monotonic() - started

    def stop(self) -> None:
        self.server.stop()


class Worker:
    """`celery worker` of both queues with embedded beat (-B), prefork: what a SIGKILL of the whole worker hits."""

    def __init__(self, database_url: str, broker_url: str, folder: Path) -> None:
        sep = "&" if "?" in database_url else "?"
        env = app_env(f"{database_url}{sep}application_name={WORKER_APP}", broker_url, folder)
        command = [sys.executable, "-m", "celery", "-A", "governance", "worker", "-Q", "ingest,analysis", "-B"]
        command += ["--schedule", str(folder / "beat-schedule"), "--concurrency", "2", "--prefetch-multiplier", "1"]
        command += ["--without-heartbeat", "--without-gossip", "--without-mingle", "--loglevel", "INFO"]
        self.process = Process(command, env, folder / "worker.log")

    def start(self) -> None:
        self.process.start()

    def kill(self) -> None:
        self.process.kill()

    def stop(self) -> None:
        self.process.stop()


def session_in_transaction(cursor) -> int | None:
    """The client port of a worker session inside a transaction now (processing a batch), if any."""
    cursor.execute(
        "SELECT client_port FROM pg_stat_activity WHERE application_name = %s AND xact_start IS NOT NULL"
        " AND state IN ('active', 'idle in transaction') AND datname = current_database() LIMIT 1",
        [WORKER_APP],
    )
    row = cursor.fetchone()
    return row[0] if row else None


def process_of_port(port: int) -> int | None:
    """The local process whose TCP socket has this local port (Linux /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        try:
            if os.readlink(fd) in inodes:
                return int(fd.parts[2])
        except OSError:
            continue
    return None


def in_transaction(cursor) -> bool:
    """Whether a worker session is inside a transaction now (processing a batch)."""
    cursor.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND xact_start IS NOT NULL"
        " AND state IN ('active', 'idle in transaction') AND datname = current_database()",
        [WORKER_APP],
    )
    return cursor.fetchone()[0] > 0
