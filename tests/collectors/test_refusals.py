"""What the server refuses is never lost to configuration: a batch refused because of the token stays in the spool
(and every round and report says why) until the token is fixed, then arrives once; a batch refused for what it
holds moves to the spool's dead-letter folder with the server's error. Against a live server on PostgreSQL."""

import gzip
import json
import logging
from datetime import timedelta

import pytest

from collectors.agent import gzip_batch
from collectors.spool import DeadLetterFull, Spool
from governance.api.services import api_token_create
from governance.usage.models import IngestBatch, Sample
from tests.collectors.test_agent import START, make_agent

pytestmark = pytest.mark.django_db(transaction=True)
GPUS = 8  # the simulated node's, one sample each a round


def not_a_batch() -> bytes:
    return gzip.compress(json.dumps({"batch_id": "nope", "collector": "x", "records": []}).encode(), mtime=0)


def errors(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "gpu-collector" and r.levelno >= logging.ERROR]


def test_batches_a_token_bound_to_another_cluster_may_not_report_are_kept_then_sent_once_it_is_fixed(
    tmp_path, live_server, cast, caplog
):
    _, wrong = api_token_create(user=cast.admin, name="node-17", scope="ingest", clusters=["c9"])
    agent = make_agent(tmp_path, live_server.url, token=wrong)

    for _ in range(4):
        agent.sample()
    agent.report()

    c = agent.counters
    kept = c.read
    assert (c.sent, c.dropped, c.dead, c.spooled) == (0, 0, 0, kept) and kept > 4 * GPUS
    assert sum(b.records for b in agent.spool.batches()) == kept and agent.spool.dead_letters() == []
    said = errors(caplog)
    assert len([m for m in said if "refuses the token" in m and "cluster_not_allowed" in m]) == 5  # 4 rounds, report
    assert "may not report cluster 'c1'" in said[-1] and "dead=0" in said[-1]
    assert IngestBatch.objects.count() == 0

    # The admin issues a token bound to the node's cluster; the agent restarts with it, on the same spool.
    _, fixed = api_token_create(user=cast.admin, name="node-17-c1", scope="ingest", clusters=["c1"])
    caplog.clear()
    agent = make_agent(tmp_path, live_server.url, token=fixed)
    agent.now = lambda: START + timedelta(minutes=5)  # the round after the four kept
    agent.sample()
    assert agent.replay() is True

    assert agent.spool.batches() == [] and agent.counters.sent == kept + agent.counters.read
    assert IngestBatch.objects.count() == 5 and Sample.objects.count() == 5 * GPUS
    assert errors(caplog) == [] and agent.token_refused is None


def test_batches_an_unknown_token_sends_stay_in_the_spool(tmp_path, live_server, cast, caplog):
    agent = make_agent(tmp_path, live_server.url, token="ggt_not-a-token")

    agent.sample()
    agent.sample()

    c = agent.counters
    assert (c.sent, c.dropped, c.dead, c.spooled) == (0, 0, 0, c.read) and len(agent.spool.batches()) == 2
    assert any("refuses the token" in m and "HTTP 401" in m for m in errors(caplog))


def test_a_batch_refused_for_its_content_moves_to_the_dead_letter_folder_with_the_servers_error(
    tmp_path, live_server, ingest_token, caplog
):
    agent = make_agent(tmp_path, live_server.url, token=ingest_token)
    agent.spool.put(not_a_batch(), 3, key="00000000000000000001-bad")

    agent.sample()

    c = agent.counters
    assert (c.dead, c.dropped, c.sent) == (3, 0, c.read) and agent.spool.batches() == []
    [buried] = agent.spool.dead_letters()
    assert buried.records == 3 and buried.read() == not_a_batch()
    error = (agent.spool.dead / "00000000000000000001-bad-3.error.txt").read_text()
    assert error.startswith("HTTP 400 invalid_records:") and "batch_id" in error
    assert any(str(buried.path) in m and "invalid_records" in m for m in errors(caplog))
    assert Sample.objects.count() == GPUS


def test_a_full_dead_letter_folder_keeps_what_it_holds_and_says_it_dropped_the_new_batch(
    tmp_path, live_server, ingest_token, caplog
):
    agent = make_agent(tmp_path, live_server.url, token=ingest_token)
    agent.spool = Spool(tmp_path / "spool", dead_max_bytes=len(not_a_batch()) + 60)
    agent.spool.put(not_a_batch(), 3, key="00000000000000000001-bad")
    agent.spool.put(not_a_batch(), 4, key="00000000000000000002-bad")

    assert agent.replay() is True

    assert [b.records for b in agent.spool.dead_letters()] == [3]  # the oldest is kept
    assert (agent.counters.dead, agent.counters.dropped) == (3, 4) and agent.spool.batches() == []
    assert any("dead-letter folder full" in m and "4 records" in m for m in errors(caplog))


def test_the_dead_letter_folder_refuses_a_batch_over_its_bound_and_leaves_it_in_the_spool(tmp_path):
    spool = Spool(tmp_path / "spool", dead_max_bytes=10)
    spool.put(gzip_batch("test", []), 5)
    [batch] = spool.batches()

    with pytest.raises(DeadLetterFull):
        spool.bury(batch, "HTTP 400 invalid_records: ...")

    assert spool.batches() == [batch] and spool.dead_letters() == []
