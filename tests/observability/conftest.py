"""A real Prometheus (Debian's `prometheus`), started once per test run on a free port, scraping the live server's
/metrics every second with the README's scrape job and loading docs/prometheus-rules.yml; stopped by its PID."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from django.conf import settings

from tests.processes import stop_by_pid

REPO = Path(settings.BASE_DIR)
README = REPO / "README.md"
RULES = REPO / "docs" / "prometheus-rules.yml"
TOKEN = "prometheus-scrape-token-1234"
# What the README's job names and the test replaces: the compose web service and the token file's path.
README_TARGET = "web:8000"
README_TOKEN_FILE = "/etc/prometheus/gg-metrics-token"
GLOBAL = """global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - {rules}
"""


def installed(program: str) -> str:
    """The path of Debian's prometheus package's `program` (prometheus, promtool); the tests skip without it,
    except in CI (CI=true), where they fail."""
    found = shutil.which(program)
    if found:
        return found
    reason = f"needs {program} (apt-get install --no-install-recommends prometheus; .ci/run installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}: absent in CI")
    pytest.skip(reason)


def readme_scrape_job() -> str:
    """The README's scrape config: the yaml block of the metrics section that holds `scrape_configs:`."""
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(), flags=re.S)
    jobs = [b for b in blocks if b.startswith("scrape_configs:")]
    assert len(jobs) == 1, "the README shows one Prometheus scrape config"
    return jobs[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Prometheus:
    url: str
    job: str  # the scrape job as used: the README's, target and token file replaced
    token_file: Path
    target: str

    def api(self, path: str, **params: Any) -> Any:
        response = requests.get(f"{self.url}/api/v1/{path}", params=params, timeout=5)
        body = response.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return self.api("query", query=expr)["result"]

    def value(self, expr: str) -> float | None:
        """The one series' current value, None when the query returns none."""
        result = self.query(expr)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None


@pytest.fixture(scope="session")
def prometheus(django_db_setup, live_server, tmp_path_factory) -> Iterator[Prometheus]:
    binary = installed("prometheus")
    home = tmp_path_factory.mktemp("prometheus")
    token_file = home / "gg-metrics-token"
    token_file.write_text(TOKEN + "\n")  # Prometheus strips the trailing newline, as operators' files have one
    target = live_server.url.removeprefix("http://")
    job = readme_scrape_job().replace(README_TARGET, target).replace(README_TOKEN_FILE, str(token_file))
    (home / "prometheus.yml").write_text(GLOBAL.format(rules=RULES) + job)
    port = free_port()
    log = (home / "prometheus.log").open("w")
    process = subprocess.Popen(
        [binary, f"--config.file={home / 'prometheus.yml'}", f"--storage.tsdb.path={home / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"prometheus did not start:\n{(home / 'prometheus.log').read_text()[-4000:]}")
            time.sleep(0.2)
        yield Prometheus(url=url, job=job, token_file=token_file, target=target)
    finally:
        stop_by_pid(process)
        log.close()


@pytest.fixture(autouse=True)
def _metrics_on(settings):
    settings.METRICS_TOKEN = TOKEN


def eventually(check: Any, timeout: float = 20.0) -> Any:
    """Poll `check` (a callable) until it returns something truthy: Prometheus sees a change at its next scrape
    (every second) and its rules at the next evaluation."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.25)
