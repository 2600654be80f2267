"""The web tier's load generator (benchmarks/web_load.py): what it posts, and how it reads its arguments."""

from datetime import UTC, datetime
from pathlib import Path

from benchmarks import web_load
from collectors.records import SampleRecord, decode_batch


def test_it_posts_one_nodes_eight_gpus_of_one_interval_each_under_a_batch_id_of_its_own():
    now = datetime(2026, 11, 3, 9, 15, tzinfo=UTC)

    batches = [decode_batch(body) for body in web_load._bodies(3, now)]

    assert len({b.batch_id for b in batches}) == 3
    for batch in batches:
        samples = [r for r in batch.records if isinstance(r, SampleRecord)]
        assert len(samples) == 8 and {s.ts for s in samples} == {now}
        assert {s.cluster for s in samples} == {web_load.CLUSTER}


def test_a_server_is_a_label_a_checkout_and_gunicorn_options():
    server = web_load._parse_server("base=/srv/base=--workers 2 --worker-class gthread")

    assert server.label == "base" and server.root == Path("/srv/base")
    assert server.args == ["--workers", "2", "--worker-class", "gthread"]
    assert web_load._parse_server("mine").root == web_load.ROOT
