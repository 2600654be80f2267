"""Rate limits count requests per token in fixed windows: one counter per token, whatever the rate, counted by one
atomic statement, so that requests of several processes at once are all counted."""

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from subprocess import PIPE

import pytest
from django.db import connection

from governance.api.counters import rate_counts_purge, window_count
from governance.api.models import ApiToken, RateCount
from governance.api.throttling import TokenScopedRateThrottle
from tests.api.conftest import bearer
from tests.processes import web_process_env

ROOT = Path(__file__).resolve().parents[2]

INGEST = "/api/v1/ingest/"

pytestmark = pytest.mark.django_db


def test_the_ingest_rate_refuses_the_request_past_it_with_retry_after(client, ingest_token, monkeypatch, one_window):
    monkeypatch.setattr(TokenScopedRateThrottle, "THROTTLE_RATES", {"user": "1200/min", "ingest": "3/min"})

    statuses = [client.post(INGEST, b"{}", content_type="application/json", **bearer(ingest_token)) for _ in range(4)]

    assert [r.status_code for r in statuses] == [400, 400, 400, 429]
    assert 0 < int(statuses[-1]["Retry-After"]) <= 60


def test_the_counter_is_one_number_however_many_requests_came(client, ingest_token, monkeypatch):
    monkeypatch.setattr(TokenScopedRateThrottle, "timer", lambda self: 1_800_000_030.0)
    for _ in range(5):
        client.post(INGEST, b"{}", content_type="application/json", **bearer(ingest_token))

    key = f"throttle_ingest_token-{ApiToken.objects.get().pk}"

    assert window_count(key, window_end=1_800_000_060) == 5


def test_a_new_window_starts_a_new_count(client, ingest_token, monkeypatch):
    monkeypatch.setattr(TokenScopedRateThrottle, "THROTTLE_RATES", {"user": "1200/min", "ingest": "2/min"})
    now = [1_800_000_030.0]
    monkeypatch.setattr(TokenScopedRateThrottle, "timer", lambda self: now[0])

    first = [client.post(INGEST, b"{}", content_type="application/json", **bearer(ingest_token)) for _ in range(3)]
    now[0] += 60
    later = client.post(INGEST, b"{}", content_type="application/json", **bearer(ingest_token))

    assert [r.status_code for r in first] == [400, 400, 429] and first[-1]["Retry-After"] == "30"
    assert later.status_code == 400


# Each process waits for the word, then sends its requests as fast as it can: the two processes' requests interleave.
RACER = """
import sys, time, pathlib, time_machine
time_machine.travel({moment}, tick=False).start()
import django; django.setup()
from django.test import Client
client, here = Client(), pathlib.Path({folder!r})
client.get("/api/v1/", HTTP_AUTHORIZATION="Bearer {token}")  # connected and warm before the word
(here / "ready-{n}").touch()
while not (here / "go").exists():
    time.sleep(0.001)
codes = [client.get("/api/v1/teams/", HTTP_AUTHORIZATION="Bearer {token}").status_code for _ in range({requests})]
print(codes.count(200), codes.count(429))
"""


@pytest.mark.skipif(connection.vendor != "postgresql", reason="another process reaches the test database on a server")
@pytest.mark.django_db(transaction=True)
def test_two_processes_at_once_get_the_rate_between_them_and_not_a_request_more(cast, read_token, one_window):
    """Two web processes serve one token at the same moment, 150 requests each after one to warm up, at 150 a
    minute: 150 answered in all, the warm-ups with them, and the rest refused. Django's database cache lost counts
    here (its increment reads, then writes back): 300 requests of one token from two processes counted 219."""
    env = web_process_env(API_THROTTLE_RATE="150/min")
    with tempfile.TemporaryDirectory() as folder:
        scripts = [RACER.format(moment=one_window, folder=folder, token=read_token, n=n, requests=150) for n in (1, 2)]
        racers = [
            subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env, stdout=PIPE, stderr=PIPE, text=True)
            for script in scripts
        ]
        deadline = time.monotonic() + 120
        while not all((Path(folder) / f"ready-{n}").exists() for n in (1, 2)):
            assert time.monotonic() < deadline and all(r.poll() is None for r in racers), racers[0].stderr
            time.sleep(0.01)
        (Path(folder) / "go").touch()
        outputs = [r.communicate(timeout=300) for r in racers]

    assert all(r.returncode == 0 for r in racers), [err for _, err in outputs]
    answered, refused = (sum(int(out.split()[i]) for out, _ in outputs) for i in (0, 1))
    assert (answered, refused) == (150 - 2, 150 + 2)
    token = ApiToken.objects.get(name="reader")
    assert RateCount.objects.get(key=f"throttle_user_token-{token.pk}").count == 2 + 300


@pytest.mark.django_db
def test_a_later_window_counts_from_one_again_and_windows_long_over_are_purged(client, read_token, monkeypatch):
    now = [1_800_000_030.0]
    monkeypatch.setattr(TokenScopedRateThrottle, "timer", lambda self: now[0])
    monkeypatch.setattr("governance.api.throttling.TokenRateThrottle.timer", lambda self: now[0])
    for _ in range(3):
        client.get("/api/v1/teams/", **bearer(read_token))
    now[0] += 60
    client.get("/api/v1/teams/", **bearer(read_token))
    (row,) = RateCount.objects.all()

    assert (row.count, row.window_end) == (1, 1_800_000_120)
    assert rate_counts_purge(now=1_800_000_120 + 60) == 0  # its window ended a minute ago: kept a little longer
    assert rate_counts_purge(now=1_800_000_120 + 61) == 1 and not RateCount.objects.exists()
