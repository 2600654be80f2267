"""Benchmark: the overview for a month of a 256-GPU cluster, built through the real write path, then rolled back."""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal

from django.db import connection, transaction
from django.test import RequestFactory

from collectors.records import Batch
from collectors.simulate import GPU_MODEL, SimulatedCluster
from governance.costs.models import RateCard
from governance.dashboard import views
from governance.dashboard.charts import overview_charts
from governance.dashboard.filters import filters_parse
from governance.lib.months import Month
from governance.org.models import User
from governance.usage.services import usage_records_write

GPUS = 256
# A month at 60 s is 11 million samples; hourly keeps `make bench` within a minute or two, and the
# rollups the page reads hold one row per GPU-hour whatever the sampling interval.
INTERVAL_S = int(os.environ.get("BENCH_DASHBOARD_INTERVAL_S", "3600"))
MONTH = Month(2001, 3)
CLUSTER = "bench-dashboard-256"
CHUNK = 50_000
REPEATS = 3


def _load() -> int:
    RateCard.objects.create(
        gpu_model=GPU_MODEL, price_per_gpu_hour=Decimal("2.50"), currency="USD", valid_from=MONTH.previous().start
    )
    sim = SimulatedCluster(cluster=CLUSTER, gpus=GPUS, start=MONTH.start, end=MONTH.end)
    chunk: list = []
    written = 0
    for record in sim.history(timedelta(seconds=INTERVAL_S)):
        chunk.append(record)
        if len(chunk) >= CHUNK:
            written += usage_records_write(batch=Batch(batch_id=uuid.uuid4(), collector="bench", records=chunk)).samples
            chunk = []
    if chunk:
        written += usage_records_write(batch=Batch(batch_id=uuid.uuid4(), collector="bench", records=chunk)).samples
    return written


def run(out: Callable[[str, object], None]) -> None:
    with transaction.atomic():
        started = time.perf_counter()
        samples = _load()
        out("overview_bench_load_s", round(time.perf_counter() - started, 1))
        out("overview_bench_samples", samples)
        if connection.vendor == "postgresql":
            # A live database has planner statistics (autovacuum); rows written in this open transaction do not.
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE usage_job, usage_jobgpuhour, usage_gpuhour, fleet_gpu, fleet_node")
        user = User.objects.create(username=f"bench-{uuid.uuid4().hex[:8]}", role=User.Role.ADMIN)
        query = {"month": str(MONTH), "cluster": CLUSTER}
        request = RequestFactory().get("/", query)
        request.user = user
        timings = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            response = views.overview(request)
            timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
        out("overview_page_ms", round(statistics.median(timings), 1))
        charts, _ = overview_charts(filters_parse(query=query, user=user), user)
        out("overview_figure_bytes", sum(chart.json_bytes for chart in charts))
        for chart in charts:
            points = max((len(t.get("x") or []) for t in chart.figure["data"]), default=0)
            out(f"overview_{chart.id.replace('-', '_')}_bytes", chart.json_bytes)
            out(f"overview_{chart.id.replace('-', '_')}_points_per_trace_max", points)
        transaction.set_rollback(True)
