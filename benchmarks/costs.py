"""The ledger's reads and writes (PostgreSQL), each beside the floor PostgreSQL itself sets:

- `csv_vs_copy`: the FOCUS CSV of a million ledger rows (formatted in SQL, streamed by COPY) against a plain
  `COPY TO STDOUT` of the same rows; `csv_peak_rss_mib`: how much the process grew while streaming it.
- `reprice_job_days_per_s`: job-days re-priced per second from jobs and hourly rollups.

Rows are generated set-based inside a transaction that is rolled back, so the database is left as it was.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

from django.db import connection, transaction

from benchmarks.harness import Out, ratio
from governance.costs.focus import focus_csv
from governance.costs.reprice import reprice
from governance.lib.env import env_int
from governance.lib.months import Month

MONTH = Month(2001, 1)
MODEL = "BENCH GPU"
DAYS_PER_JOB = 10

CLUSTER = """
WITH c AS (INSERT INTO fleet_cluster (name, unallocated_policy, created_at) VALUES ('bench-costs', 'show', now())
           RETURNING id),
     t AS (INSERT INTO org_team (slug, name, lead_email, created_at) VALUES ('bench-costs', 'Bench', '', now())
           RETURNING id)
INSERT INTO org_project (team_id, slug, name, created_at) SELECT id, 'bench-costs', 'Bench', now() FROM t
"""

# A million ledger rows as the worker writes them: one per job and day.
LEDGER = """
INSERT INTO costs_charge (kind, month, day, period_start, period_end, cluster_id, cluster_name, job_id, job_ref,
    user_name, team_id, team_name, project_id, project_name, gpu_model, mig_profile, gpu_hours, used_gpu_hours,
    idle_gpu_hours, cost, list_cost, contracted_cost, billed_cost, idle_cost, energy_kwh, energy_cost, currency,
    at_default_rate, corrects, corrected_kind, reason, priced_at)
SELECT 'usage', %(month)s, %(month)s::date + (i %% 28), %(month)s::timestamptz + (i %% 28) * interval '1 day',
       %(month)s::timestamptz + (i %% 28 + 1) * interval '1 day', c.id, 'bench-costs', i, 'job-' || (i / 28),
       'user-' || (i %% 97), p.team_id, 'Bench', p.id, 'Bench', %(model)s, '', 24 * (1 + i %% 8),
       12.5 * (1 + i %% 8), 2.4 * (1 + i %% 8), 60 * (1 + i %% 8), 60 * (1 + i %% 8), 60 * (1 + i %% 8),
       60 * (1 + i %% 8), 6 * (1 + i %% 8), 16.8, 2.52, 'USD', false,
       NULL, '', '', now()
FROM generate_series(1, %(rows)s) AS i, fleet_cluster c, org_project p
WHERE c.name = 'bench-costs' AND p.slug = 'bench-costs'
"""
RAW = "COPY (SELECT * FROM costs_charge WHERE month = %s ORDER BY kind, period_start, id) TO STDOUT (FORMAT csv)"

JOBS = """
WITH n AS (INSERT INTO fleet_node (cluster_id, name) SELECT id, 'bench-node' FROM fleet_cluster
           WHERE name = 'bench-costs' RETURNING id, cluster_id)
INSERT INTO fleet_gpu (cluster_id, node_id, uuid, index, model, memory_total_mib, mig_profile, first_seen_at,
                       last_seen_at)
SELECT cluster_id, id, 'GPU-bench-' || i, i %% 1024, %(model)s, 81559, '', %(start)s, %(start)s
FROM n, generate_series(1, %(jobs)s) AS i;
INSERT INTO costs_declaredcapacity (cluster_id, gpu_model, count, valid_from, created_at)
SELECT id, %(model)s, 1000000, %(start)s, now() FROM fleet_cluster WHERE name = 'bench-costs';
INSERT INTO usage_job (cluster_id, external_id, user_name, account, team_name, project_id, gpus, gpu_model,
                       submit_time, start_time, end_time, state, labels, described, updated_at)
SELECT c.id, 'b' || i, 'bench', 'bench-costs', 'bench', p.id, 1 + i %% 8, %(model)s,
       %(start)s::timestamptz + (i %% 20) * interval '1 day', %(start)s::timestamptz + (i %% 20) * interval '1 day',
       %(start)s::timestamptz + (i %% 20 + %(days)s) * interval '1 day', 'completed', '{}', true, now()
FROM generate_series(1, %(jobs)s) AS i, fleet_cluster c, org_project p
WHERE c.name = 'bench-costs' AND p.slug = 'bench-costs';
INSERT INTO usage_jobgpuhour (job_id, gpu_id, hour, samples, idle_samples, sm_sum, sm_max, sm_sq_sum, mem_used_max,
    mem_total_mib, power_sum, power_samples, numa_mismatch_samples, io_wait_sum, io_wait_samples, host_cpu_sum,
    host_cpu_samples, tensor_sum, tensor_samples)
SELECT j.id, g.id, j.start_time + d * interval '1 day' + interval '12 hours', 60, 6, 3000, 90, 180000, 1000, 81559,
       30000, 60, 0, 0, 0, 0, 0, 0, 0
FROM usage_job j JOIN fleet_gpu g ON g.uuid = 'GPU-bench-' || substr(j.external_id, 2) AND g.cluster_id = j.cluster_id,
     generate_series(0, %(days)s - 1) AS d
WHERE j.cluster_id = (SELECT id FROM fleet_cluster WHERE name = 'bench-costs');
INSERT INTO costs_ratecard (gpu_model, price_per_gpu_hour, currency, valid_from, created_at)
VALUES (%(model)s, 2.5, 'USD', %(start)s, now())
"""


class _Rollback(Exception):
    pass


def _rss_mib() -> float:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run(out: Out) -> None:
    if connection.vendor != "postgresql":
        out("costs_csv", "skipped (needs PostgreSQL)")
        return
    for measure in (_csv, _reprice):
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(CLUSTER)
                measure(out)
                raise _Rollback
        except _Rollback:
            pass


def _csv(out: Out) -> None:
    rows = env_int("GOVERNANCE_BENCH_CSV_ROWS", 1_000_000)
    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(LEDGER, {"month": MONTH.start.date(), "model": MODEL, "rows": rows})
        cursor.execute("ANALYZE costs_charge")
    out("csv_seed_s", round(time.perf_counter() - began, 1))

    rss_before, rss_peak = _rss_mib(), 0.0
    began = time.perf_counter()
    count = size = 0
    for i, chunk in enumerate(focus_csv(month=MONTH)):
        data = chunk if isinstance(chunk, bytes) else chunk.encode()
        count += data.count(b"\n")
        size += len(data)
        if i % 64 == 0:
            rss_peak = max(rss_peak, _rss_mib())
    csv_s = time.perf_counter() - began
    count -= 1  # the header

    began = time.perf_counter()
    copy_rows = 0
    with connection.cursor() as cursor, cursor.cursor.copy(cursor.cursor.mogrify(RAW, [MONTH.start.date()])) as copy:
        for block in copy:
            copy_rows += bytes(block).count(b"\n")
    copy_s = time.perf_counter() - began

    out("csv_rows", count)
    out("csv_rows_per_s", round(count / csv_s))
    out("csv_mib", round(size / 2**20, 1))
    out("csv_peak_rss_mib", round(max(rss_peak - rss_before, 0.0), 1))
    out("copy_rows", copy_rows)
    out("copy_rows_per_s", round(copy_rows / copy_s))
    out("csv_vs_copy", ratio(count / csv_s, copy_rows / copy_s, 3))


def _reprice(out: Out) -> None:
    jobs = env_int("GOVERNANCE_BENCH_REPRICE_JOBS", 5_000)
    start = datetime(2001, 1, 1, tzinfo=UTC)
    with connection.cursor() as cursor:
        cursor.execute(JOBS, {"model": MODEL, "start": start, "days": DAYS_PER_JOB, "jobs": jobs})
        cursor.execute("ANALYZE usage_job; ANALYZE usage_jobgpuhour")
        cursor.execute("SELECT id, start_time FROM usage_job WHERE external_id LIKE 'b%%'")
        spans = cursor.fetchall()
    job_days = {pk: {(started.date().toordinal() + d) for d in range(DAYS_PER_JOB)} for pk, started in spans}
    job_days = {pk: {datetime.fromordinal(d).date() for d in days} for pk, days in job_days.items()}
    began = time.perf_counter()
    done = reprice(job_days=job_days, cluster_days=set(), now=datetime(2001, 3, 1, tzinfo=UTC))
    seconds = time.perf_counter() - began
    out("reprice_job_days", done.job_days)
    out("reprice_job_days_per_s", round(done.job_days / seconds))
