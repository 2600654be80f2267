"""CSV export speed and memory for a million job-day rows, beside a raw COPY of the same rows (PostgreSQL).

The rows are generated set-based inside a transaction that is rolled back, so the database is left as it was.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from itertools import islice

from django.db import connection, transaction

from governance.costs.focus import focus_csv
from governance.costs.ledger import month_charges
from governance.lib.env import env_int
from governance.lib.months import Month

MONTH = Month(2001, 1)
DAYS_PER_JOB = 10
MODEL = "BENCH GPU"
TRACED = 100_000

SEED = """
WITH c AS (INSERT INTO fleet_cluster (name, unallocated_policy, created_at) VALUES ('bench-costs', 'show', now())
           RETURNING id),
     t AS (INSERT INTO org_team (slug, name, lead_email, created_at) VALUES ('bench-costs', 'Bench', '', now())
           RETURNING id),
     p AS (INSERT INTO org_project (team_id, slug, name, created_at) SELECT id, 'bench-costs', 'Bench', now() FROM t
           RETURNING id),
     n AS (INSERT INTO fleet_node (cluster_id, name) SELECT id, 'bench-node' FROM c RETURNING id, cluster_id),
     g AS (INSERT INTO fleet_gpu (cluster_id, node_id, uuid, index, model, memory_total_mib, mig_profile,
                                  first_seen_at, last_seen_at)
           SELECT cluster_id, id, 'GPU-bench', 0, %(model)s, 81559, '', %(start)s, %(start)s FROM n RETURNING id)
INSERT INTO usage_job (cluster_id, external_id, user_name, account, team_name, project_id, gpus, gpu_model,
                       submit_time, start_time, end_time, state, labels, described, updated_at)
SELECT c.id, 'b' || i, 'bench', 'bench-costs', 'bench', p.id, 1 + i %% 8, %(model)s,
       %(start)s::timestamptz + (i %% 20) * interval '1 day', %(start)s::timestamptz + (i %% 20) * interval '1 day',
       %(start)s::timestamptz + (i %% 20 + %(days)s) * interval '1 day', 'completed', '{}', true, now()
FROM generate_series(1, %(jobs)s) AS i, c, p
"""

ROLLUPS = """
INSERT INTO usage_jobgpuhour (job_id, gpu_id, hour, samples, idle_samples, sm_sum, sm_max, sm_sq_sum, mem_used_max,
    mem_total_mib, power_sum, power_samples, numa_mismatch_samples, io_wait_sum, io_wait_samples, host_cpu_sum,
    host_cpu_samples, tensor_sum, tensor_samples)
SELECT j.id, g.id, j.start_time + d * interval '1 day' + interval '12 hours', 60, 6, 3000, 90, 180000, 1000, 81559,
       30000, 60, 0, 0, 0, 0, 0, 0, 0
FROM usage_job j JOIN fleet_gpu g ON g.uuid = 'GPU-bench' AND g.cluster_id = j.cluster_id,
     generate_series(0, %(days)s - 1) AS d
WHERE j.cluster_id = (SELECT id FROM fleet_cluster WHERE name = 'bench-costs')
"""

# The same job-day rows, joined and computed in SQL only: the floor that any CSV export is compared with.
COPY = """
COPY (
  SELECT j.external_id, j.gpus, j.gpu_model, d.day, d.day + interval '1 day', j.gpus * 24 * r.price_per_gpu_hour,
         h.sm_sum / nullif(h.samples, 0) / 100, h.idle_samples::float8 / nullif(h.samples, 0)
  FROM usage_job j
  CROSS JOIN LATERAL generate_series(date_trunc('day', j.start_time), j.end_time - interval '1 second',
                                     interval '1 day') AS d(day)
  LEFT JOIN usage_jobgpuhour h ON h.job_id = j.id AND date_trunc('day', h.hour) = d.day
  JOIN costs_ratecard r ON r.gpu_model = j.gpu_model
  WHERE j.cluster_id = (SELECT id FROM fleet_cluster WHERE name = 'bench-costs')
) TO STDOUT
"""


class _Rollback(Exception):
    pass


def run(out: Callable[[str, object], None]) -> None:
    if connection.vendor != "postgresql":
        out("costs_csv", "skipped (needs PostgreSQL)")
        return
    rows = env_int("GOVERNANCE_BENCH_CSV_ROWS", 1_000_000)
    try:
        with transaction.atomic():
            _measure(out, rows)
            raise _Rollback
    except _Rollback:
        pass


def _csv_lines(now: datetime) -> Iterator[str]:
    for chunk in focus_csv(month_charges(month=MONTH, now=now), month=MONTH):
        yield from chunk.splitlines()


def _measure(out: Callable[[str, object], None], rows: int) -> None:
    start = MONTH.start
    params = {"model": MODEL, "start": start, "days": DAYS_PER_JOB, "jobs": max(rows // DAYS_PER_JOB, 1)}
    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM costs_ratecard WHERE gpu_model = %s", [MODEL])
        cursor.execute(
            "INSERT INTO costs_ratecard (gpu_model, price_per_gpu_hour, currency, valid_from, created_at)"
            " SELECT %s, 2.5, coalesce((SELECT min(currency) FROM costs_ratecard), 'USD'), %s, now()",
            [MODEL, datetime(2000, 1, 1, tzinfo=UTC)],
        )
        cursor.execute(SEED, params)
        cursor.execute(ROLLUPS, params)
        cursor.execute("ANALYZE usage_job; ANALYZE usage_jobgpuhour")
    out("costs_csv_seed_s", round(time.perf_counter() - began, 1))

    now = datetime(2001, 3, 1, tzinfo=UTC)
    # tracemalloc slows allocation-heavy code about fivefold, so speed and memory are measured in two passes:
    # the speed over every row untraced, the peak over the first TRACED rows (memory is flat: it does not grow).
    traced = min(rows, TRACED)
    tracemalloc.start()
    for _ in islice(_csv_lines(now), traced):
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    began = time.perf_counter()
    count = size = 0
    for chunk in focus_csv(month_charges(month=MONTH, now=now), month=MONTH):
        count += chunk.count("\n")
        size += len(chunk)
    csv_s = time.perf_counter() - began
    count -= 1  # the header

    began = time.perf_counter()
    copy_rows = 0
    with connection.cursor() as cursor, cursor.cursor.copy(COPY) as copy:
        for block in copy:
            copy_rows += bytes(block).count(b"\n")
    copy_s = time.perf_counter() - began

    out("csv_rows", count)
    out("csv_rows_per_s", round(count / csv_s))
    out("csv_peak_mib", round(peak / 2**20, 1))
    out("csv_peak_traced_rows", traced)
    out("csv_mib", round(size / 2**20, 1))
    out("copy_rows", copy_rows)
    out("copy_rows_per_s", round(copy_rows / copy_s))
    out("csv_vs_copy", round(copy_s / csv_s, 3))
