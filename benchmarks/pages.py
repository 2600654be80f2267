"""Pages: the overview for a month of a 256-GPU cluster, built through the real write path, then rolled back;
the overview and a team's month page at 256 GPUs, and the overview, a team's month, the finance month and the
cluster heatmap at 2,560 GPUs (real write path, priced) and 25,600 (written straight into rollups, ledger and
summary: benchmarks/fleet_month.py), and 2,560 written the same way. `<page>_flat_10x` divides the 25,600-GPU
figure by the written 2,560-GPU one (same shape of month, ten times the fleet); `<page>_25600_vs_real_path_2560` by
the real-path one, whose month holds many more jobs a GPU. Goal: `<page>_flat_10x` <= 1.3, each under 300 ms at
25,600 GPUs, the heatmap under 500 ms."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal

from django.db import connection, transaction
from django.db.models import Sum
from django.test import RequestFactory

from benchmarks.fleet_month import fleet_month_write
from benchmarks.harness import Out, median_ms, ratio
from collectors.records import Batch
from collectors.simulate import GPU_MODEL, SimulatedCluster
from governance.costs.models import Charge, RateCard
from governance.costs.reprice import charges_reprice
from governance.dashboard.charts import overview_charts
from governance.dashboard.filters import filters_parse
from governance.dashboard.views.costs import finance_month, team_month
from governance.dashboard.views.overview import heatmap, overview
from governance.lib.months import Month
from governance.org.models import Team, User
from governance.usage.services import usage_records_write

GPUS = 256
# A month at 60 s is 11 million samples; hourly keeps `make bench` within a minute or two, and the
# rollups the page reads hold one row per GPU-hour whatever the sampling interval.
INTERVAL_S = int(os.environ.get("BENCH_DASHBOARD_INTERVAL_S", "3600"))
MONTH = Month(2001, 3)
CLUSTER = "bench-dashboard-256"
CHUNK = 50_000
REPEATS = 3


def _load(gpus: int = GPUS, cluster: str = CLUSTER, create_projects: bool = False) -> int:
    RateCard.objects.get_or_create(
        gpu_model=GPU_MODEL, cluster=None, valid_from=MONTH.previous().start,
        defaults={"price_per_gpu_hour": Decimal("2.50"), "currency": "USD"},
    )  # fmt: skip
    sim = SimulatedCluster(cluster=cluster, gpus=gpus, start=MONTH.start, end=MONTH.end)
    chunk: list = []
    written = 0

    def write(records: list) -> int:
        batch = Batch(batch_id=uuid.uuid4(), collector="bench", records=records)
        return usage_records_write(batch=batch, create_projects=create_projects).samples

    for record in sim.history(timedelta(seconds=INTERVAL_S)):
        chunk.append(record)
        if len(chunk) >= CHUNK:
            written += write(chunk)
            chunk = []
    if chunk:
        written += write(chunk)
    return written


def _page(view: Callable, request, *args) -> Callable[[], None]:
    def render() -> None:
        response = view(request, *args)
        if response.status_code != 200:
            raise RuntimeError(f"{view.__name__} answered {response.status_code}")

    return render


def _analyze() -> None:
    if connection.vendor == "postgresql":
        # A live database has planner statistics (autovacuum); rows written in this open transaction do not.
        with connection.cursor() as cursor:
            cursor.execute(
                "ANALYZE usage_job, usage_jobgpuhour, usage_gpuhour, usage_nodehour, usage_nodeday, usage_clusterhour,"
                " fleet_gpu, fleet_node, costs_charge, costs_ledgerday, costs_jobmonth, costs_capacityday,"
                " efficiency_finding"
            )


def _just_after_the_month():
    """The clock just after the bench month: a job the simulation leaves running is charged up to then, as a
    live system would charge it, not for the 25 years to the real now (time_machine: `make bench` installs dev)."""
    import time_machine

    return time_machine.travel(MONTH.end + timedelta(hours=6), tick=True)


PAGES = ("overview", "team_month", "finance_month", "heatmap")
FLEET_GPUS = int(os.environ.get("BENCH_PAGES_FLEET_GPUS", "25600"))


def _page_times(cluster: str) -> dict[str, float]:
    """Median ms of the overview, the costliest team's month, the finance month and the cluster's month heatmap,
    as an admin opens them."""
    _analyze()
    user = User.objects.create(username=f"bench-{uuid.uuid4().hex[:8]}", role=User.Role.ADMIN)
    team_id = (
        Charge.objects.filter(month=MONTH.start.date(), team__isnull=False)
        .values("team_id").annotate(c=Sum("cost")).order_by("-c").values_list("team_id", flat=True).first()
    )  # fmt: skip
    slug = Team.objects.get(pk=team_id).slug
    request = RequestFactory().get("/", {"month": str(MONTH)})
    request.user = user
    cells = RequestFactory().get("/cluster/", {"month": str(MONTH), "cluster": cluster})
    cells.user = user
    pages = (_page(overview, request), _page(team_month, request, slug), _page(finance_month, request),
             _page(heatmap, cells))  # fmt: skip
    return dict(zip(PAGES, (round(ms, 1) for ms in median_ms(*pages, repeats=REPEATS)), strict=True))


def _pages_at(gpus: int, out: Out) -> dict[str, float]:
    """The pages for a month of `gpus` GPUs through the real write path, priced; rolled back after."""
    with _just_after_the_month(), transaction.atomic():
        started = time.perf_counter()
        _load(gpus, f"bench-pages-{gpus}", create_projects=True)
        out(f"pages_bench_load_{gpus}_s", round(time.perf_counter() - started, 1))
        started = time.perf_counter()
        charges_reprice(budget_s=None)
        out(f"pages_bench_price_{gpus}_s", round(time.perf_counter() - started, 1))
        times = _page_times(f"bench-pages-{gpus}")
        transaction.set_rollback(True)
    return times


def _pages_at_fleet(gpus: int, out: Out) -> dict[str, float]:
    """The pages for a month of `gpus` GPUs written straight into rollups, ledger and summary; rolled back after."""
    with _just_after_the_month(), transaction.atomic():
        started = time.perf_counter()
        fleet_month_write(gpus=gpus, month=MONTH, cluster=f"bench-fleet-{gpus}", model=GPU_MODEL)
        out(f"pages_bench_write_{gpus}_s", round(time.perf_counter() - started, 1))
        times = _page_times(f"bench-fleet-{gpus}")
        transaction.set_rollback(True)
    return times


def run_pages(out: Out) -> None:
    small = _pages_at(256, out)
    out("overview_ms_256", small["overview"])
    out("team_month_ms_256", small["team_month"])
    large = _pages_at(2560, out)
    for page in PAGES:
        out(f"{page}_ms_2560", large[page])
    out("overview_flat", ratio(large["overview"], small["overview"]))
    out("team_month_flat", ratio(large["team_month"], small["team_month"]))
    # The flat ratio compares like with like: both fleets written the same way (a node-long job per node), so the
    # ratio measures the fleet's size alone; the real-path month at 2,560 holds ~9x the jobs of the written one.
    written = _pages_at_fleet(FLEET_GPUS // 10, out)
    fleet = _pages_at_fleet(FLEET_GPUS, out)
    for page in PAGES:
        out(f"{page}_ms_{FLEET_GPUS // 10}_written", written[page])
        out(f"{page}_ms_{FLEET_GPUS}", fleet[page])
        out(f"{page}_flat_10x", ratio(fleet[page], written[page]))
        out(f"{page}_{FLEET_GPUS}_vs_real_path_2560", ratio(fleet[page], large[page]))


def run(out: Out) -> None:
    run_overview(out)
    run_pages(out)


def run_overview(out: Out) -> None:
    with _just_after_the_month(), transaction.atomic():
        started = time.perf_counter()
        samples = _load()
        charges_reprice(budget_s=None)  # as the worker would: the ledger and the cluster-hours the overview reads
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
        (page_ms,) = median_ms(_page(overview, request), repeats=REPEATS)
        out("overview_page_ms", round(page_ms, 1))
        charts, _ = overview_charts(filters_parse(query=query, user=user), user)
        out("overview_figure_bytes", sum(chart.json_bytes for chart in charts))
        for chart in charts:
            points = max((len(t.get("x") or []) for t in chart.figure["data"]), default=0)
            out(f"overview_{chart.id.replace('-', '_')}_bytes", chart.json_bytes)
            out(f"overview_{chart.id.replace('-', '_')}_points_per_trace_max", points)
        transaction.set_rollback(True)
