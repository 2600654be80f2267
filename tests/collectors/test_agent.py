import gzip
import socket
from datetime import UTC, datetime, timedelta

import pytest

from collectors.agent import Agent, gzip_batch
from collectors.records import decode_batch
from collectors.sender import Sender
from collectors.sources.simulate import SimulateSource
from collectors.spool import Spool

START = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class Steps:
    """The agent's clock and its UTC time, one minute further each round."""

    def __init__(self) -> None:
        self.round = 0

    def now(self) -> datetime:
        self.round += 1
        return START + timedelta(minutes=self.round)


def make_agent(tmp_path, server: str, token: str = "t", **kwargs) -> Agent:  # noqa: S107
    steps = Steps()
    return Agent(
        source=SimulateSource(cluster="c1", gpus=8, start=START),
        collector="test",
        sender=Sender(server, token, attempts=2, backoff=0.01, timeout=5),
        spool=Spool(tmp_path / "spool"),
        batch_seconds=0,
        now=steps.now,
        **kwargs,
    )


def test_while_the_server_is_down_every_batch_goes_to_the_spool(tmp_path):
    agent = make_agent(tmp_path, closed_port_url())

    for _ in range(3):
        agent.sample()

    c = agent.counters
    assert c.read > 24 and (c.sent, c.spooled, c.dropped) == (0, c.read, 0)
    batches = agent.spool.batches()
    assert len(batches) == 3 and sum(b.records for b in batches) == c.read
    first = decode_batch(gzip.decompress(batches[0].read()))
    assert first.records[-1].ts == START + timedelta(minutes=1)  # oldest first


def test_the_spool_drops_the_oldest_batches_over_its_bound_and_counts_their_records(tmp_path):
    spool = Spool(tmp_path / "spool", max_bytes=1)
    body = gzip_batch("test", [])

    assert spool.put(body, 5) == 0
    assert spool.put(body, 7) == 5
    assert [b.records for b in spool.batches()] == [7]


def test_a_write_cut_short_leaves_no_half_batch(tmp_path):
    folder = tmp_path / "spool"
    folder.mkdir()
    (folder / ".000-1-000001-3.batch.gz.tmp").write_bytes(b"\x1f\x8b half")

    spool = Spool(folder)

    assert spool.batches() == [] and list(folder.iterdir()) == []


@pytest.mark.django_db(transaction=True)
def test_after_an_outage_every_record_arrives_exactly_once(tmp_path, live_server, ingest_token):
    from governance.usage.models import IngestBatch, Job, Sample

    agent = make_agent(tmp_path, closed_port_url(), token=ingest_token)
    for _ in range(4):
        agent.sample()
    spooled = agent.counters.spooled

    agent.sender = Sender(live_server.url, ingest_token, attempts=2, backoff=0.01)
    agent.sample()
    agent.sample()

    c = agent.counters
    assert (c.sent, c.spooled, c.dropped) == (c.read, spooled, 0)
    assert agent.spool.batches() == []
    assert Sample.objects.count() == 6 * 8
    assert IngestBatch.objects.count() == 6 and Job.objects.exists()
    assert agent.replay() is True and Sample.objects.count() == 48


def test_records_wait_for_a_full_batch_or_its_age(tmp_path):
    clock = iter(range(0, 1000, 10))
    agent = make_agent(tmp_path, closed_port_url(), batch_size=1000)
    agent.batch_seconds, agent.clock = 25, lambda: next(clock)

    agent.sample()
    agent.sample()
    assert agent.spool.batches() == [] and agent.pending

    agent.sample()
    assert agent.pending == 0 and len(agent.spool.batches()) == 1
