"""What a fleet costs to keep, measured here, and its projection to 1,000 / 10,000 / 100,000 GPUs (docs/scaling.md).

A simulated cluster of STORAGE_GPUS GPUs sampled every STORAGE_INTERVAL_S seconds for STORAGE_HOURS hours goes
through the import path in this process (validate, inbox, stage, samples, rollups, marks), then the pricing pass.
Printed:
- bytes_per_sample: the sample partitions' size with their indexes, per sample;
- bytes_per_gpu_hour_rollup: both hourly rollups (per GPU-hour and per job, GPU and hour), per GPU-hour;
- bytes_per_job_day_ledger: the charge ledger with its indexes, per usage row (a job's day on one model);
- ingest_samples_per_core_s (store, process and price each batch) and price_job_days_per_core_s (a month
  re-priced in one pass): what one core does of each, in this process;
- for each fleet size and interval, `scale_<gpus>_<interval>s_*`: raw samples per day (GB), rollups and ledger
  per year (GB), and the share of one core that ingest and pricing need, from the figures above.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db import connection, transaction

from benchmarks.harness import Out
from benchmarks.ingest import _tasks_in_process as celery_eager
from collectors.simulate import GPU_MODEL, SimulatedCluster
from governance.costs.models import Charge, RateCard
from governance.costs.settle import month_reprice
from governance.lib.months import Month
from governance.usage.models import GpuHour, Sample
from governance.usage.services import usage_records_import

STORAGE_GPUS, STORAGE_HOURS, STORAGE_INTERVAL_S = 256, 4, 30
FLEETS = (1_000, 10_000, 100_000)
INTERVALS_S = (10, 60)
GB = 1e9
PRICING_EVERY_S = 60


def _size(tables_like: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " WHERE c.relkind IN ('r', 'p') AND c.relname LIKE %s",
            [tables_like],
        )
        return int(cursor.fetchone()[0])


def _job_days_per_gpu_day(start: datetime, days: int = 14) -> float:
    """Ledger rows (a job's UTC day) that one GPU-day makes in the simulated workload (jobs of 1-8 GPUs running
    hours to days), laid out over `days` days."""
    sim = SimulatedCluster(cluster="storage", gpus=STORAGE_GPUS, start=start, end=start + timedelta(days=days))
    rows = 0
    for job in sim.jobs:
        first, last = max(job.start, sim.start), min(job.end, sim.end)
        if first < last:
            rows += (last - timedelta(microseconds=1)).date().toordinal() - first.date().toordinal() + 1
    return rows / (STORAGE_GPUS * days)


def run(out: Out) -> None:
    RateCard.objects.create(
        gpu_model=GPU_MODEL, price_per_gpu_hour=Decimal("2.50"), valid_from=datetime(2020, 1, 1, tzinfo=UTC)
    )
    end = datetime(2026, 10, 20, tzinfo=UTC)
    sim = SimulatedCluster(cluster="storage", gpus=STORAGE_GPUS, start=end - timedelta(hours=STORAGE_HOURS), end=end)
    # What the empty tables weigh (index meta pages, the partitions' first pages) is not what a row costs.
    empty = {t: _size(t) for t in ("usage_sample%", "usage_gpuhour", "usage_jobgpuhour", "costs_charge")}
    records = list(sim.history(timedelta(seconds=STORAGE_INTERVAL_S)))
    with celery_eager():
        started = time.perf_counter()
        for chunk_no, first in enumerate(range(0, len(records), 10_000)):
            # Each batch is stored, then processed on commit (what the ingest worker does), then priced.
            with transaction.atomic():
                usage_records_import(records=records[first : first + 10_000], source_digest="storage", chunk=chunk_no)
        ingest_s = time.perf_counter() - started
    # The pricing pass alone: the window's whole month re-priced in one pass, as `manage.py reprice` does.
    started = time.perf_counter()
    month_reprice(month=Month.of(end - timedelta(hours=1)))
    price_s = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    samples = Sample.objects.count()
    gpu_hours = GpuHour.objects.count()
    job_days = Charge.objects.filter(kind=Charge.Kind.USAGE).count()
    grown = {t: _size(t) - before for t, before in empty.items()}
    per_sample = grown["usage_sample%"] / samples
    per_gpu_hour = (grown["usage_gpuhour"] + grown["usage_jobgpuhour"]) / gpu_hours
    per_job_day = grown["costs_charge"] / job_days
    ingest_rate, price_rate = samples / ingest_s, job_days / price_s
    job_days_per_gpu_day = _job_days_per_gpu_day(end)
    out("storage_samples", samples)
    out("storage_gpu_hours", gpu_hours)
    out("storage_job_days", job_days)
    out("bytes_per_sample", round(per_sample, 1))
    out("bytes_per_gpu_hour_rollup", round(per_gpu_hour, 1))
    out("bytes_per_job_day_ledger", round(per_job_day, 1))
    out("ingest_samples_per_core_s", round(ingest_rate))
    out("price_job_days_per_core_s", round(price_rate))
    out("job_days_per_gpu_day", round(job_days_per_gpu_day, 3))
    for gpus in FLEETS:
        for every in INTERVALS_S:
            name = f"scale_{gpus}_{every}s"
            samples_per_s = gpus / every
            out(f"{name}_raw_gb_per_day", round(samples_per_s * 86_400 * per_sample / GB, 2))
            out(f"{name}_rollup_gb_per_year", round(gpus * 24 * 365 * per_gpu_hour / GB, 2))
            out(f"{name}_ledger_gb_per_year", round(gpus * job_days_per_gpu_day * 365 * per_job_day / GB, 2))
            out(f"{name}_ingest_cores", round(samples_per_s / ingest_rate, 3))
            # Every minute's pass re-prices each job-day that got samples since the last: all the running ones.
            out(f"{name}_pricing_cores", round(gpus * job_days_per_gpu_day / PRICING_EVERY_S / price_rate, 4))
