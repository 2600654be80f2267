"""The web tier's cost per ingest POST: `python -m benchmarks.web_load [--server LABEL=ROOT[=GUNICORN ARGS]] ...`.

Starts gunicorn from each checkout ROOT (its own code: PYTHONPATH=ROOT:ROOT/agent) on the database of
DATABASE_URL (migrated first) and the broker of CELERY_BROKER_URL, with no Celery worker (the tasks it enqueues are
purged afterwards: only the web is measured), and POSTs `--posts` small batches (one 8-GPU node, one interval) from
`--threads` threads, each over one keep-alive http.client connection (a server that closes it after each answer,
as gunicorn's sync workers do, gets a new one per POST). Servers take turns for `--rounds` rounds, so a busy moment
of a shared machine slows each of them alike; per server the medians of:

- web_load_<label>_posts_per_s: POSTs answered 202 per wall second;
- web_load_<label>_cpu_ms_per_post: CPU (utime + stime, /proc) of the gunicorn processes per POST;
- web_load_<label>_postgres_ms_per_post: CPU of the database's backends per POST;
- web_load_machine_busy: what the whole machine ran over the same time (others' work too), cores busy.

Without --server, this checkout with the bench's gunicorn options (benchmarks/pipeline.py).
"""

from __future__ import annotations

import argparse
import http.client
import os
import shlex
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = "webload"
WARMUP_POSTS = 40


@dataclass(frozen=True)
class Server:
    label: str
    root: Path
    args: list[str]


def _parse_server(text: str) -> Server:
    label, _, rest = text.partition("=")
    root, _, args = rest.partition("=")
    return Server(label=label, root=Path(root or ROOT).resolve(), args=shlex.split(args))


def _bodies(count: int, now: datetime) -> list[bytes]:
    from collectors.simulate import SimulatedCluster

    sim = SimulatedCluster(cluster=CLUSTER, gpus=8, start=now.replace(hour=0, minute=0), end=now)
    samples = sim.node_samples_json(now)[0]
    return [
        b'{"batch_id":"%s","collector":"webload","records":[%s]}' % (str(uuid.uuid4()).encode(), samples)
        for _ in range(count)
    ]


def _post_all(port: int, token: str, bodies: list[bytes], threads: int) -> list[int]:
    """POST every body, `threads` at a time, each thread over its own keep-alive connection; the statuses."""
    statuses: list[int] = []
    lock = threading.Lock()
    chunks = [bodies[i::threads] for i in range(threads)]
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}

    def run(chunk: list[bytes]) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            for body in chunk:
                connection.request("POST", "/api/v1/ingest/", body=body, headers=headers)
                response = connection.getresponse()
                response.read()
                with lock:
                    statuses.append(response.status)
        finally:
            connection.close()

    workers = [threading.Thread(target=run, args=(chunk,)) for chunk in chunks]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return statuses


def _tree_ticks(root_pid: int) -> int:
    from benchmarks.fleet_probe import _children, _cpu_ticks

    return sum(_cpu_ticks(pid) or 0 for pid in _children({root_pid}))


def _backend_ticks(database: str) -> int:
    from django.db import connection

    from benchmarks.fleet_probe import _cpu_ticks

    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [database])
        return sum(_cpu_ticks(pid) or 0 for (pid,) in cursor.fetchall())


def _started(server: Server, port: int, env: dict[str, str]) -> subprocess.Popen:
    path = f"{server.root}:{server.root / 'agent'}"
    command = [sys.executable, "-m", "gunicorn", "governance.wsgi:application", "--bind", f"127.0.0.1:{port}",
               "--no-control-socket", *server.args]  # fmt: skip
    return subprocess.Popen(  # noqa: S603
        command, cwd=server.root, env={**env, "PYTHONPATH": path}, stdout=subprocess.DEVNULL, stderr=sys.stderr
    )


def _listening(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/healthz")
            connection.getresponse().read()
            connection.close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"gunicorn did not start (exit {process.poll()})") from None
            time.sleep(0.2)


def _measure(server: Server, env: dict[str, str], token: str, posts: int, threads: int) -> dict[str, float]:
    from benchmarks.fleet_probe import CLOCK_TICKS, _busy_ticks
    from benchmarks.pipeline import _free_port

    database = env["DATABASE_URL"].rsplit("/", 1)[1]
    port = _free_port()
    process = _started(server, port, env)
    try:
        _listening(port, process)
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        _post_all(port, token, _bodies(WARMUP_POSTS, now), threads)  # every worker imported and connected
        bodies = _bodies(posts, now)
        web, db, busy = _tree_ticks(process.pid), _backend_ticks(database), _busy_ticks()
        started = time.perf_counter()
        statuses = _post_all(port, token, bodies, threads)
        wall = time.perf_counter() - started
        web, db = _tree_ticks(process.pid) - web, _backend_ticks(database) - db
        busy = _busy_ticks() - busy
    finally:
        process.terminate()
        process.wait(timeout=60)
    refused = [s for s in statuses if s != 202]
    if refused:
        raise RuntimeError(f"{server.label}: {len(refused)} POSTs refused, first with {refused[0]}")
    return {
        "posts_per_s": posts / wall,
        "cpu_ms_per_post": web / CLOCK_TICKS * 1000 / posts,
        "postgres_ms_per_post": db / CLOCK_TICKS * 1000 / posts,
        "machine_busy": busy / CLOCK_TICKS / wall,
    }


def _without_control(options: list[str]) -> list[str]:
    return [option for option in options if option != "--no-control-socket"]


def _setup() -> str:
    from django.core.management import call_command
    from django.db import transaction

    from collectors.records import decode_batch
    from governance.api.services import api_token_create
    from governance.org.models import User
    from governance.usage.services import usage_records_write

    call_command("migrate", verbosity=0)
    # The node's GPUs known already, as after a fleet's first interval: the fleet-growth check finds them.
    with transaction.atomic():
        usage_records_write(batch=decode_batch(_bodies(1, datetime.now(UTC).replace(second=0, microsecond=0))[0]))
    admin, _ = User.objects.get_or_create(username="webload-admin", defaults={"role": User.Role.ADMIN})
    return api_token_create(user=admin, name=f"webload-{uuid.uuid4().hex[:8]}", scope="ingest", clusters=[CLUSTER])[1]


def _server_env() -> dict[str, str]:
    return {
        **os.environ, "DEBUG": "false", "SECRET_KEY": "web-load-" + uuid.uuid4().hex, "ALLOWED_HOSTS": "127.0.0.1",
        "API_THROTTLE_RATE_INGEST": "1000000/min", "LOG_LEVEL": "WARNING", "SECURE_SSL_REDIRECT": "false",
        "FLEET_MAX_NEW_GPUS_PER_TOKEN_HOUR": "1000000", "STATIC_MANIFEST": "false",
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.web_load", description=__doc__)
    parser.add_argument("--server", action="append", default=[], help="LABEL=ROOT[=GUNICORN ARGS], repeatable")
    parser.add_argument("--posts", type=int, default=300)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    import django

    django.setup()
    from benchmarks.pipeline import gunicorn_options
    from governance.celery import app as celery_app
    from governance.usage.models import IngestBatch

    default = Server("this", ROOT, _without_control(gunicorn_options()))
    servers = [_parse_server(text) for text in args.server] or [default]
    token = _setup()
    env = _server_env()
    figures: dict[str, dict[str, list[float]]] = {s.label: {} for s in servers}
    try:
        for _ in range(args.rounds):
            for server in servers:
                for name, value in _measure(server, env, token, args.posts, args.threads).items():
                    figures[server.label].setdefault(name, []).append(value)
    finally:
        celery_app.control.purge()
        IngestBatch.objects.filter(collector="webload").delete()
    busy: list[float] = []
    for label, measured in figures.items():
        busy += measured.pop("machine_busy", [])
        for name, values in measured.items():
            runs = ", ".join(f"{v:.2f}" for v in values)
            print(f"web_load_{label}_{name}: {statistics.median(values):.2f}  (runs: {runs})")
    print(f"web_load_machine_busy: {statistics.median(busy):.2f} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
