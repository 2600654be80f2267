"""Ingest and chargeback figures (PostgreSQL; run on a throwaway bench database by benchmarks/harness.py).

- ingest_samples_per_s: simulated batches POSTed over loopback HTTP, by as many concurrent collectors as
  there are web workers, to a real gunicorn web tier while real `celery worker -Q ingest` processes (as
  docker-compose.yml runs them: one per core, prefetch 1) consume the inbox, both on CELERY_BROKER_URL and
  the bench database, from the first POST to the last batch processed. Without a broker the task runs
  in-process right after each POST (Celery eager), which measures web + worker time in series;
  `ingest_mode` says which ran. Best of INGEST_RUNS runs of ~92,000 samples each. ingest_vs_copy divides
  the rate by that of a raw binary COPY (psycopg set_types/write_row) of the very rows each run wrote, right
  after it, into an empty copy of usage_sample (its indexes and monthly partitions included), best of the runs;
  ingest_vs_copy_plain_table does the same against a plain heap without either. Every run counts the
  batches stored and the samples written against those posted, and the months written reconcile to the cent.
- chargeback_ms_1x / _10x: the month's chargeback for the same jobs and GPUs sampled every 60 s (July)
  and every 6 s (September), both months in the database at once and timed in turns (median of REPEATS);
  chargeback_vs_sql: the selector's time over a hand-written SQL aggregate on the rollups.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.core.management import call_command
from django.db import connection, transaction
from django.db.models import Count
from django.test import Client

from benchmarks.harness import Out, median_ms, ratio
from benchmarks.pipeline import INGEST_WORKERS, Pipeline, pipeline_started, post_all, wait_processed
from collectors.records import Record, encode, new_batch
from collectors.simulate import GPU_MODEL, SimulatedCluster
from governance.api.services import api_token_create
from governance.celery import app as celery_app
from governance.costs import selectors as costs_selectors
from governance.costs.models import RateCard
from governance.costs.reprice import charges_reprice
from governance.costs.services import capacity_set
from governance.fleet.models import Cluster
from governance.lib.money import to_cents
from governance.lib.months import Month
from governance.org.models import User
from governance.usage import partitions, writer
from governance.usage.models import IngestBatch, Sample
from governance.usage.services import usage_records_import

# A cluster-level collector's scrape of a 10,000-GPU cluster is one 10,000-record batch every 10 s; a
# node agent's batches are smaller, so the rate at 2,000 records is printed as well.
BATCH_RECORDS = 10_000
SMALL_BATCH_RECORDS = 2_000
INGEST_GPUS, INGEST_HOURS, INGEST_INTERVAL_S = 64, 4, 10
CHARGEBACK_GPUS, CHARGEBACK_DAYS = 16, 2
REPEATS = 30
INGEST_RUNS = 5

# What a finance analyst would write by hand: allocated GPU-hours per team from the job rollup, priced
# at the rate in force at each hour.
CHARGEBACK_SQL = """
SELECT t.name, count(*) AS gpu_hours, sum(r.price_per_gpu_hour) AS cost
FROM usage_jobgpuhour h
JOIN usage_job j ON j.id = h.job_id
LEFT JOIN org_project p ON p.id = j.project_id
LEFT JOIN org_team t ON t.id = p.team_id
JOIN LATERAL (
    SELECT price_per_gpu_hour FROM costs_ratecard c
    WHERE c.gpu_model = j.gpu_model AND c.cluster_id IS NULL AND c.valid_from <= h.hour
    ORDER BY c.valid_from DESC LIMIT 1
) r ON true
WHERE h.hour >= %s AND h.hour < %s
GROUP BY t.name
"""


def _batches(records: Iterator[Record], size: int) -> list[bytes]:
    bodies, chunk = [], []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            bodies.append(encode(new_batch("bench", chunk)))
            chunk = []
    if chunk:
        bodies.append(encode(new_batch("bench", chunk)))
    return bodies


def _setup() -> str:

    user = User.objects.create_user("bench-admin", role=User.Role.ADMIN)
    RateCard.objects.create(
        gpu_model=GPU_MODEL, price_per_gpu_hour=Decimal("2.50"), valid_from=datetime(2020, 1, 1, tzinfo=UTC)
    )
    return api_token_create(user=user, name="bench", scope="ingest", clusters=["bench", "bench-small"])[1]


def _sample_rows(start: datetime, end: datetime) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {', '.join(writer.SAMPLE_COLUMNS)} FROM usage_sample WHERE ts >= %s AND ts < %s", [start, end]
        )
        return cursor.fetchall()


def _copy_rate(rows: list[tuple], *, same_table: bool) -> float:
    """Rows per second of a raw binary COPY of `rows` into an empty copy of usage_sample.

    `same_table`: the copy has usage_sample's indexes and, on a partitioned usage_sample, its partitions
    (what the ingest path writes into); otherwise it is a plain heap with neither (PostgreSQL's best case).
    """
    cols = ", ".join(writer.SAMPLE_COLUMNS)
    table = "bench_copy"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {table}")
        if same_table and partitions.is_partitioned():
            cursor.execute(f"CREATE TABLE {table} (LIKE usage_sample INCLUDING ALL) PARTITION BY RANGE (ts)")
            cursor.execute(
                "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i"
                " JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'usage_sample'::regclass"
            )
            for name, bound in cursor.fetchall():
                cursor.execute(f"CREATE TABLE bench_{name} PARTITION OF {table} {bound}")
        else:
            cursor.execute(f"CREATE TABLE {table} (LIKE usage_sample INCLUDING {'ALL' if same_table else 'DEFAULTS'})")
    with transaction.atomic(), connection.cursor() as cursor:
        started = time.perf_counter()
        with cursor.cursor.copy(f"COPY {table} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(writer.SAMPLE_TYPES)
            for row in rows:
                copy.write_row(row)
        rate = len(rows) / (time.perf_counter() - started)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {table}")
    return rate


@contextmanager
def _tasks_in_process() -> Iterator[None]:
    """Celery tasks run eagerly, in this process, for the duration (then as configured again)."""
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = eager


def _ingest_rate(token: str, bodies: list[bytes], pipeline: Pipeline | None) -> float:
    """Samples per second from the first POST to the last batch processed; checks none was lost or doubled."""
    before, batches_before = Sample.objects.count(), IngestBatch.objects.count()
    expected = sum(body.count(b'"kind":"sample"') for body in bodies)
    started = time.perf_counter()
    if pipeline is not None:
        post_all(pipeline.url, token, bodies)
        wait_processed(pipeline)
    else:
        client = Client()
        with _tasks_in_process():
            for body in bodies:
                response = client.post(
                    "/api/v1/ingest/", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
                )
                if response.status_code != 202:
                    raise RuntimeError(f"ingest answered {response.status_code}: {response.content[:200]!r}")
    elapsed = time.perf_counter() - started
    if IngestBatch.objects.filter(processed_at__isnull=True).exists():
        raise RuntimeError("some bench batches were not processed")
    stored = IngestBatch.objects.count() - batches_before
    if stored != len(bodies):
        raise RuntimeError(f"{len(bodies)} batches were posted but {stored} stored")
    written = Sample.objects.count() - before
    if written != expected:
        raise RuntimeError(f"{expected} samples were posted but {written} written")
    return written / elapsed


def _declare_capacity(month: Month) -> None:
    """Declare every bench cluster's GPUs from the start of `month` (as an admin would): the simulated clusters
    hold their GPUs all month and their jobs run past the sampled hours, so capacity inferred from the few
    hours the bench samples would not cover them."""

    for name, gpus in Cluster.objects.annotate(n=Count("gpus")).values_list("name", "n"):
        capacity_set(cluster=name, gpu_model=GPU_MODEL, count=gpus, valid_from=month.start)


def _reconcile(out: Out, month: Month, label: str = "") -> None:
    """The bench month adds up (team charges + unallocated = capacity x rate, to the cent), or the bench fails."""

    charges_reprice()  # what the analysis worker does after the batches: the marks left are priced here
    check = costs_selectors.reconcile(month=month)
    if not check.ok:
        raise RuntimeError(f"{month} does not reconcile: {check.problems}")
    total = to_cents(sum(c.charged for c in check.clusters))
    out(f"reconcile_{month.year}_{month.month:02d}{label}", f"ok ({total} {check.currency}, to the cent)")


def bench_ingest(out: Out) -> None:
    with pipeline_started() as pipeline:
        mode = "http_web_and_worker_processes" if pipeline else "in_process_sequential (no CELERY_BROKER_URL)"
        out("ingest_mode", mode)
        if pipeline is not None:
            out("ingest_web_workers", INGEST_WORKERS)
            out("ingest_workers", INGEST_WORKERS)
        _bench_ingest(out, pipeline)


def _bench_ingest(out: Out, pipeline: Pipeline | None) -> None:
    token = _setup()
    end = datetime(2026, 10, 20, tzinfo=UTC)
    every = timedelta(seconds=INGEST_INTERVAL_S)
    # Warm up (connections, first-seen GPUs and jobs, plans) on a day the measured runs do not touch.
    warm = SimulatedCluster(
        cluster="bench", gpus=INGEST_GPUS, start=end - timedelta(days=2, hours=1), end=end - timedelta(days=2)
    )
    _ingest_rate(token, _batches(warm.history(every, from_first_job=False), BATCH_RECORDS), pipeline)
    call_command("flush", interactive=False, verbosity=0)
    token = _setup()
    # Best of INGEST_RUNS, each on its own four hours and each followed at once by the COPY references of the
    # very rows it wrote: on a shared machine a run can fall on a busy moment, and taking turns, both sides
    # are read at the same moments and the same way.
    rate = copy = plain = 0.0
    for run in range(INGEST_RUNS):
        day_end = end - timedelta(days=run)
        window = SimulatedCluster(
            cluster="bench", gpus=INGEST_GPUS, start=day_end - timedelta(hours=INGEST_HOURS), end=day_end
        )
        batches = _batches(window.history(every, from_first_job=False), BATCH_RECORDS)
        rate = max(rate, _ingest_rate(token, batches, pipeline))
        rows = _sample_rows(window.start, window.end)
        copy = max(copy, _copy_rate(rows, same_table=True))
        plain = max(plain, _copy_rate(rows, same_table=False))
    samples = Sample.objects.count() // INGEST_RUNS
    out("ingest_batch_records", BATCH_RECORDS)
    out("ingest_samples", samples)
    out("ingest_samples_per_s", round(rate))
    out("copy_samples_per_s", round(copy))
    out("ingest_vs_copy", ratio(rate, copy, 3))
    out("copy_plain_table_samples_per_s", round(plain))
    out("ingest_vs_copy_plain_table", ratio(rate, plain, 3))
    later = SimulatedCluster(
        cluster="bench-small", gpus=INGEST_GPUS, start=end, end=end + timedelta(hours=INGEST_HOURS)
    )
    small = _ingest_rate(token, _batches(later.history(every, from_first_job=False), SMALL_BATCH_RECORDS), pipeline)
    out(f"ingest_samples_per_s_{SMALL_BATCH_RECORDS}_record_batches", round(small))
    out(f"ingest_vs_copy_{SMALL_BATCH_RECORDS}_record_batches", ratio(small, copy, 3))
    out("ingest_batches_processed", IngestBatch.objects.filter(processed_at__isnull=False).count())
    month = Month(end.year, end.month)
    _declare_capacity(month)
    _reconcile(out, month)


def _load(sim: SimulatedCluster, every: timedelta) -> None:
    """The cluster's history sampled every `every`, then its jobs' final records: every job running when the
    sampling stops ends within days, so no later month is charged for it."""

    later = sim.end + timedelta(days=7)
    records = [*sim.history(every), *(r for r in sim.job_records(later) if r.start_time and r.start_time < sim.end)]
    with transaction.atomic():
        for chunk_no, start in enumerate(range(0, len(records), 20000)):
            usage_records_import(records=records[start : start + 20000], source_digest=f"bench-{every}", chunk=chunk_no)


def _chargeback(month: Month, now: datetime) -> Callable[[], object]:
    """Whatever public chargeback selector costs offers; keyword arguments it does not take are left out."""

    selector = costs_selectors.chargeback_by_team
    accepted = inspect.signature(selector).parameters
    kwargs = {k: v for k, v in {"month": month, "now": now}.items() if k in accepted}  # older selectors took now
    return lambda: list(selector(**kwargs))


def _chargeback_sql(month: Month) -> Callable[[], object]:
    def by_sql() -> list[tuple]:
        with connection.cursor() as cursor:
            cursor.execute(CHARGEBACK_SQL, [month.start, month.end])
            return cursor.fetchall()

    return by_sql


def bench_chargeback(out: Out) -> None:
    """The same fleet and workload (same seed, GPUs and jobs) in two months of one database: July sampled
    every 60 s, September every 6 s. Each month's chargeback is timed in turn with the other's."""

    _setup()
    months = {"1x": (Month(2026, 7), 60), "10x": (Month(2026, 9), 6)}
    for label, (month, every) in months.items():
        cluster = f"bench-{every}s"
        end = month.start + timedelta(days=CHARGEBACK_DAYS)
        sim = SimulatedCluster(cluster=cluster, gpus=CHARGEBACK_GPUS, start=month.start, end=end)
        with _tasks_in_process():
            _load(sim, timedelta(seconds=every))
        # Each fleet holds its GPUs in its own month only (see _declare_capacity), and in the month before,
        # where the jobs already running when sampling starts began.
        capacity_set(cluster=cluster, gpu_model=GPU_MODEL, count=CHARGEBACK_GPUS, valid_from=month.previous().start)
        capacity_set(cluster=cluster, gpu_model=GPU_MODEL, count=0, valid_from=month.next().start)
        samples = Sample.objects.filter(ts__gte=month.start, ts__lt=month.end).count()
        out(f"chargeback_samples_{label}", samples)
    # Vacuumed now, not by autovacuum in the middle of the timing (the 6 s load inserts 460,000 rows): on
    # two cores that background pass alone can double a figure.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    for label, (month, _) in months.items():
        _reconcile(out, month, f"_{label}")
    (month_1x, _), (month_10x, _) = months.values()
    ms_1x, ms_10x, sql_10x = median_ms(
        _chargeback(month_1x, now=month_1x.end),
        _chargeback(month_10x, now=month_10x.end),
        _chargeback_sql(month_10x),
        repeats=REPEATS,
    )
    out("chargeback_ms_1x", round(ms_1x, 2))
    out("chargeback_ms_10x", round(ms_10x, 2))
    out("chargeback_10x_vs_1x", ratio(ms_10x, ms_1x))
    out("chargeback_sql_ms_10x", round(sql_10x, 2))
    out("chargeback_vs_sql", ratio(ms_10x, sql_10x))


def run(out: Out) -> None:
    bench_ingest(out)
    call_command("flush", interactive=False, verbosity=0)
    bench_chargeback(out)
