"""SIGKILL the agent in the middle of a batch at 300 simulated GPUs, then start it again on the same spool: the
rounds it had read reach the server, each sample once, and a round is never cut in half."""

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from collectors.spool import ROUNDS, RoundLog

ROOT = Path(__file__).resolve().parents[2]
GPUS = 300


class Recorder(ThreadingHTTPServer):
    """The ingest endpoint as far as the agent can tell: 202, and a batch id seen before is a duplicate."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.batches: dict[str, list[tuple[str, str]]] = {}
        self.duplicates = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: Recorder

    def do_POST(self) -> None:
        body = json.loads(gzip.decompress(self.rfile.read(int(self.headers["Content-Length"]))))
        samples = [(r["gpu_uuid"], r["ts"]) for r in body["records"] if r["kind"] == "sample"]
        with self.server.lock:
            duplicate = body["batch_id"] in self.server.batches
            self.server.duplicates += duplicate
            self.server.batches.setdefault(body["batch_id"], samples)
        answer = json.dumps({"batch_id": body["batch_id"], "duplicate": duplicate}).encode()
        self.send_response(202)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args) -> None:
        return None


def agent(server: str, spool: Path, log: Path) -> subprocess.Popen:
    args = ["--source", "simulate", "--gpus", str(GPUS), "--interval", "1", "--batch-seconds", "4"]
    args += ["--spool", str(spool), "--server", server, "--token", "t", "--node", "crash-test"]
    args += ["--report-seconds", "3600"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "collectors", *args], cwd=ROOT, env=env, stderr=log.open("w"))


def wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_an_agent_killed_mid_batch_loses_at_most_the_round_it_was_reading_and_doubles_nothing(tmp_path):
    server = Recorder()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    spool, rounds = tmp_path / "spool", tmp_path / "spool" / ROUNDS
    try:
        first = agent(server.url, spool, tmp_path / "first.log")
        wait_for(lambda: len(server.batches) >= 1)  # started, and sending
        wait_for(lambda: rounds.exists() and rounds.stat().st_size > 2 * GPUS * 300)  # two rounds wait for a batch
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        with server.lock:
            before = {s for samples in server.batches.values() for s in samples}
        logged = {(r["gpu_uuid"], r["ts"]) for r in map(json.loads, RoundLog(rounds).lines) if r["kind"] == "sample"}
        assert logged and not logged & before

        second = agent(server.url, spool, tmp_path / "second.log")
        wait_for(lambda: logged <= {s for samples in list(server.batches.values()) for s in samples})
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
    finally:
        server.shutdown()

    received = [s for samples in server.batches.values() for s in samples]
    assert len(received) == len(set(received)), "a sample arrived in two batches"
    per_round = Counter(ts for _, ts in received)
    assert set(per_round.values()) == {GPUS}, "a round arrived cut in half"
    assert not rounds.exists() and list(spool.glob("*.batch.gz")) == []
    print(f"agent_kill_rounds_rescued: {len(logged) // GPUS}")
    print(f"agent_kill_samples_rescued: {len(logged)}")
    print(f"agent_kill_duplicate_posts: {server.duplicates}")
