"""The round log: every round on disk before it counts as read; a crash loses at most the round being read."""

import gzip
import logging
from datetime import timedelta

from collectors.agent import Agent
from collectors.records import SampleRecord, decode_batch
from collectors.spool import ROUNDS, RoundLog, Spool
from tests.collectors.test_agent import START, closed_port_url, make_agent


def spooled_samples(agent: Agent) -> list[tuple[str, object]]:
    out = []
    for batch in agent.spool.batches():
        records = decode_batch(gzip.decompress(batch.read())).records
        out += [(r.gpu_uuid, r.ts) for r in records if isinstance(r, SampleRecord)]
    return out


def test_each_round_is_in_the_round_log_once_read(tmp_path):
    agent = make_agent(tmp_path, closed_port_url(), batch_size=1000)
    agent.batch_seconds = 3600

    agent.sample()
    agent.sample()

    on_disk = RoundLog(tmp_path / "spool" / ROUNDS)
    assert len(on_disk.lines) == agent.counters.read == agent.pending > 16
    assert agent.spool.batches() == []


def test_rounds_logged_by_an_agent_that_was_killed_are_batched_by_the_next_one(tmp_path):
    killed = make_agent(tmp_path, closed_port_url(), batch_size=1000)
    killed.batch_seconds = 3600
    killed.sample()
    killed.sample()
    read = killed.counters.read  # then SIGKILL: no flush, no exit

    agent = make_agent(tmp_path, closed_port_url(), batch_size=1000)
    agent.batch_seconds = 3600
    assert agent.pending == read
    agent.now = lambda: START + timedelta(minutes=10)  # the restarted agent's round, after the killed one's
    agent.sample()

    assert agent.pending == 0 and sum(b.records for b in agent.spool.batches()) == read + agent.counters.read
    samples = spooled_samples(agent)
    assert len(samples) == len(set(samples)) == 3 * 8


def test_a_torn_last_round_is_skipped_with_a_log_line_and_the_rounds_before_it_kept(tmp_path, caplog):
    killed = make_agent(tmp_path, closed_port_url(), batch_size=1000)
    killed.batch_seconds = 3600
    killed.sample()
    read = killed.counters.read
    with (tmp_path / "spool" / ROUNDS).open("ab") as log:
        log.write(b"\x00\x00\x10\x00\x12\x34")  # a frame header cut short, as a crash mid-append leaves it

    with caplog.at_level(logging.WARNING, logger="gpu-collector"):
        spool = Spool(tmp_path / "spool")

    assert len(spool.rounds.lines) == read
    assert "skipped a torn last round (6 bytes)" in caplog.text


def test_a_crash_between_storing_the_batch_and_emptying_the_log_cuts_the_same_batch_into_the_same_file(
    tmp_path, monkeypatch
):
    killed = make_agent(tmp_path, closed_port_url(), batch_size=1000)
    killed.batch_seconds = 3600
    killed.sample()
    monkeypatch.setattr(killed.rounds, "reset", lambda: (_ for _ in ()).throw(KeyboardInterrupt("SIGKILL")))
    try:
        killed.flush()
    except KeyboardInterrupt:
        pass
    first = [(b.path.name, b.read()) for b in killed.spool.batches()]
    assert len(first) == 1

    agent = make_agent(tmp_path, closed_port_url(), batch_size=1000)
    agent.flush()

    assert [(b.path.name, b.read()) for b in agent.spool.batches()] == first
    assert agent.pending == 0 and not (tmp_path / "spool" / ROUNDS).exists()
