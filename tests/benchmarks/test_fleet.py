"""The fleet load test at toy size: 16 GPUs (two node agents) for two intervals through the real web and workers
(what `make bench ONLY=fleet` starts, on the test database); every sample posted is written, and charged."""

import os

import pytest
from django.db import connection

from benchmarks import fleet
from governance.costs.models import Charge
from governance.usage.models import IngestBatch, Sample
from tests.invariants import assert_billing_invariants

pytestmark = [
    pytest.mark.worker,
    pytest.mark.skipif(not os.environ.get("CELERY_BROKER_URL"), reason="needs CELERY_BROKER_URL (a real broker)"),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the bench runs against PostgreSQL"),
    pytest.mark.django_db(transaction=True),
]


def test_the_fleet_bench_writes_and_charges_every_sample_its_agents_post():
    figures: dict[str, object] = {}
    size = fleet.FleetSize(gpus=16, interval_s=60, compression=30, hours=2 / 60)

    fleet.bench_fleet(figures.__setitem__, size)

    name = "fleet_16gpu_60s"
    assert figures[f"{name}_analysis_nice"] == fleet.ANALYSIS_NICE
    assert figures[f"{name}_intervals_posted"] == 2 and figures[f"{name}_stopped_early"] == "no"
    assert figures[f"{name}_batches_posted"] == 2 * 2 == IngestBatch.objects.filter(processed_at__isnull=False).count()
    assert figures[f"{name}_samples_posted"] == figures[f"{name}_samples_written"] == Sample.objects.count() == 32
    assert figures[f"{name}_intervals_uncharged"] == 0 and figures[f"{name}_batches_dead"] == 0
    assert figures[f"{name}_backlog_final"] == "0 batches, 0 marks"
    # Each job the samples name is charged for the days it was sampled on.
    sampled = set(Sample.objects.filter(job__isnull=False).values_list("job_id", "ts__date"))
    charged = set(Charge.objects.filter(kind="usage").values_list("job_id", "day"))
    assert sampled and sampled <= charged
    for page in ("overview", "team_month", "finance_month", "heatmap"):
        assert isinstance(figures[f"{name}_page_{page}_p95_ms"], int), page
    assert figures[f"{name}_page_errors"] == 0
    views = sum(figures[f"{name}_page_{page}_n"] for page in ("overview", "team_month", "finance_month", "heatmap"))
    assert 0 <= figures[f"{name}_page_slow_views"] <= views
    for kind in ("slow", "rest"):
        assert figures[f"{name}_page_{kind}_machine_cores"] >= figures[f"{name}_page_{kind}_analysis_cores"] >= 0
    # The box's share is split by queue (and by gunicorn pool where pages have one: the second test).
    shares = {key.removeprefix(f"{name}_share_") for key in figures if key.startswith(f"{name}_share_")}
    assert {"web", "web_agents", "workers", "workers_ingest", "workers_analysis", "box"} <= shares
    assert figures[f"{name}_sustained"] in {"yes", "no"}
    assert_billing_invariants()


def test_its_size_comes_from_the_environment_and_names_its_figures(monkeypatch):
    monkeypatch.setenv("FLEET_GPUS", "10000")
    monkeypatch.setenv("FLEET_INTERVAL_S", "10")
    monkeypatch.delenv("FLEET_COMPRESSION", raising=False)
    monkeypatch.delenv("FLEET_HOURS", raising=False)

    size = fleet.FleetSize.from_env()

    assert (size.gpus, size.interval_s, size.compression, size.hours) == (10_000, 10, 10.0, 2.0)
    assert size.prefix == "fleet_10k_10s" and size.intervals == 720 and size.real_interval_s == 1.0
    monkeypatch.setenv("FLEET_GPUS", "0")
    with pytest.raises(fleet.BenchError, match="FLEET_GPUS: must be above 0"):
        fleet.FleetSize.from_env()
