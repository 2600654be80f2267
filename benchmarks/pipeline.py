"""The deployed ingest path for the ingest bench: a gunicorn web tier and Celery ingest workers on the bench
database, as docker-compose.yml runs them, and collectors POSTing to it over loopback HTTP."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from django.conf import settings
from django.db import connection

from governance.celery import app as celery_app
from governance.usage.models import IngestBatch

# As docker-compose.yml deploys it: one ingest worker process per core, each taking one batch at a time.
INGEST_WORKERS = int(os.environ.get("BENCH_INGEST_WORKERS", 0)) or os.cpu_count() or 1
WEB_THREADS = int(os.environ.get("BENCH_WEB_THREADS", 4))  # per gunicorn worker, as docker-compose.yml runs it
WORKER_TIMEOUT_S = 300
ROOT = Path(__file__).resolve().parents[1]


def gunicorn_options(workers: int = INGEST_WORKERS) -> list[str]:
    """The web tier's gunicorn options, as docker-compose.yml runs it: threaded workers (gthread), which keep a
    client's connection open between its requests and serve one request while another waits on the database or
    the broker; sync workers close every connection after its answer and do one thing at a time."""
    return ["--workers", str(workers), "--worker-class", "gthread", "--threads", str(WEB_THREADS),
            "--keep-alive", "5", "--no-control-socket"]  # fmt: skip


def _database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@dataclass
class Pipeline:
    """The deployed ingest path on the bench database: a gunicorn web tier and Celery ingest workers."""

    url: str  # the web tier the collectors POST to
    processes: list[subprocess.Popen]
    roles: list[str]  # each process's: web, pages, or the queue it works
    log: Path
    secret_key: str = ""  # the web's: what signs its sessions
    page_url: str = ""  # where pages are read: a gunicorn pool of their own, or the collectors' (`url`)

    def __post_init__(self) -> None:
        self.page_url = self.page_url or self.url

    def check(self) -> None:
        for role, process in zip(self.roles, self.processes, strict=True):
            if process.poll() is not None:
                raise RuntimeError(f"the {role} process exited with {process.returncode}{self.log_tail()}")

    def log_tail(self) -> str:
        return "; its log ends:\n" + "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_listening(url: str, pipeline: Pipeline) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/v1/", timeout=5):  # noqa: S310 - loopback
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            pipeline.check()
            if time.monotonic() > deadline:
                raise RuntimeError("the bench web server did not start") from None
            time.sleep(0.2)


@contextmanager
def pipeline_started(
    *, analysis_workers: int = 0, analysis_nice: int = 0, analysis_parallel: int | None = None, page_workers: int = 0
) -> Iterator[Pipeline | None]:
    """Web and worker processes as docker-compose.yml runs them, or None (in-process, eager) without a broker.
    `analysis_workers`: that many processes of a worker of the analysis queue too (pricing, findings), run by
    `nice -n analysis_nice` when that is above 0 (a lower CPU priority than the web's and the ingest workers'), its
    database sessions with `max_parallel_workers_per_gather` = `analysis_parallel` where that is given (through
    DATABASE_URL's `options`, as a deployment would set it for that worker alone).
    `page_workers`: pages served by a gunicorn pool of their own with that many workers; 0 (as docker-compose.yml
    deploys its one `web`): pages and ingest share one pool."""
    if not settings.CELERY_BROKER_URL:
        yield None
        return
    celery_app.control.purge()  # tasks left on this broker by earlier runs name other databases' batches
    port, page_port = _free_port(), _free_port()
    secret_key = secrets.token_urlsafe(32)
    env = {
        **os.environ, "DATABASE_URL": _database_url(), "DEBUG": "false", "SECRET_KEY": secret_key,
        "ALLOWED_HOSTS": "127.0.0.1", "API_THROTTLE_RATE_INGEST": "100000/min", "LOG_LEVEL": "WARNING",
        "SECURE_SSL_REDIRECT": "false",  # plain HTTP on loopback: no TLS proxy in front of the bench
        # A whole simulated fleet comes online in the bench's first hour: the onboarding bound is not what it measures.
        "FLEET_MAX_NEW_GPUS_PER_TOKEN_HOUR": "1000000",
        # Throttle counts in Redis, as docker-compose.yml deploys it (there in a database of its own; here the
        # broker's, whose keys the cache's never meet), not in the database's cache table.
        "CACHE_URL": os.environ.get("CACHE_URL") or settings.CELERY_BROKER_URL,
        # Pages link static files by their plain names: the bench does not run collectstatic for the hashed ones.
        "STATIC_MANIFEST": "false",
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        workers = [("ingest", INGEST_WORKERS)] + ([("analysis", analysis_workers)] if analysis_workers else [])
        pidfiles = [Path(tmp) / f"worker-{queue}.pid" for queue, _ in workers]
        webs = [("web", port, INGEST_WORKERS)] + ([("pages", page_port, page_workers)] if page_workers else [])
        # What the analysis worker alone is started with: its priority, and its database sessions' options.
        analysis_prefix = ["nice", "-n", str(analysis_nice)] if analysis_nice > 0 else []
        analysis_env = env if analysis_parallel is None else {
            **env, "DATABASE_URL": env["DATABASE_URL"] + "?" + urlencode(
                {"options": f"-c max_parallel_workers_per_gather={analysis_parallel}"})
        }  # fmt: skip
        commands = [
            [sys.executable, "-m", "gunicorn", "governance.wsgi:application", "--bind", f"127.0.0.1:{bound}",
             *gunicorn_options(workers)]
            for _, bound, workers in webs
        ] + [
            (analysis_prefix if queue == "analysis" else [])
            + [sys.executable, "-m", "celery", "-A", "governance", "worker", "-Q", queue, "-n", f"{queue}@%h",
             "--concurrency", str(concurrency), "--prefetch-multiplier", "1", "--pidfile", str(pidfile),
             "--loglevel", "WARNING", "--without-heartbeat", "--without-gossip", "--without-mingle"]
            for (queue, concurrency), pidfile in zip(workers, pidfiles, strict=True)
        ]  # fmt: skip
        envs = [env] * len(webs) + [analysis_env if queue == "analysis" else env for queue, _ in workers]
        log_path = Path(tmp) / "pipeline.log"
        with log_path.open("w") as log:
            processes = [
                subprocess.Popen(command, cwd=ROOT, env=penv, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
                for command, penv in zip(commands, envs, strict=True)
            ]
            pipeline = Pipeline(
                url=f"http://127.0.0.1:{port}",
                processes=processes,
                log=log_path,
                secret_key=secret_key,
                page_url=f"http://127.0.0.1:{page_port}" if page_workers else "",
                roles=[role for role, _, _ in webs] + [queue for queue, _ in workers],
            )
            try:
                for url in {pipeline.url, pipeline.page_url}:
                    _wait_listening(url, pipeline)
                yield pipeline
            finally:
                for web in processes[: len(webs)]:
                    web.terminate()
                for worker, pidfile in zip(processes[len(webs) :], pidfiles, strict=True):
                    if pidfile.exists():
                        os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
                    else:
                        worker.terminate()
                for process in processes:
                    process.wait(timeout=60)


# What the bench polls while it waits, every 10 ms: one fixed statement, not a queryset compiled each time (the
# observer's own CPU comes out of the same two cores as the ingest it times).
UNPROCESSED = f"SELECT EXISTS (SELECT 1 FROM {IngestBatch._meta.db_table} WHERE processed_at IS NULL)"


def wait_processed(pipeline: Pipeline) -> None:
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    with connection.cursor() as cursor:
        while True:
            cursor.execute(UNPROCESSED)
            if not cursor.fetchone()[0]:
                return
            pipeline.check()
            if time.monotonic() > deadline:
                raise RuntimeError(f"the ingest workers did not process the bench batches in time{pipeline.log_tail()}")
            time.sleep(0.01)


def post_all(url: str, token: str, bodies: list[bytes]) -> None:
    """POST every batch over loopback HTTP, from as many collectors at once as the web tier has workers."""

    def post(body: bytes) -> None:
        request = urllib.request.Request(  # noqa: S310 - loopback
            f"{url}/api/v1/ingest/",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
            if response.status != 202:
                raise RuntimeError(f"ingest answered {response.status}: {response.read(200)!r}")

    with ThreadPoolExecutor(max_workers=2 * INGEST_WORKERS) as pool:
        list(pool.map(post, bodies))
