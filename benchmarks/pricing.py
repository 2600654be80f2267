"""Pricing, findings and the close as the fleet grows (PostgreSQL).

- `reprice_job_days_per_s_<gpus>`: the worker's path: every job-day of a month marked (as ingest marks them), then
  priced by `charges_reprice` pass after pass. One job per GPU, ten days each, on a cluster that declares its GPUs.
- `findings_jobs_per_s_<gpus>`: one evaluation pass over every job of that month.
- `close_month_<gpus>_s`: closing the month once the worker has drained its marks.
- `price_fleet_hour_100k_s`: one hour of 100,000 GPUs (12,500 running 8-GPU jobs) after its samples landed: the
  job-days and the cluster-day it marked, priced.

The larger fleet should keep at least 0.8 of the smaller one's pace (`..._pace_10x`). The smaller fleet's pricing
and findings take a few seconds each, where one busy moment of a shared machine moved the ratio by a third: each
fleet's are timed TRIES times (each from the same marked month, the tries before rolled back) and the best
counts, the same way for both sizes. `GOVERNANCE_BENCH_PRICING_GPUS` (default `2560,25600`) and
`GOVERNANCE_BENCH_FLEET_HOUR_GPUS` (default 100000) size them. Rows are written set-based inside a transaction that
is rolled back.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction

from benchmarks.harness import Out, ratio
from governance.costs.reprice import charges_reprice
from governance.costs.services import statement_close
from governance.efficiency.services import findings_evaluate
from governance.lib.env import env_int, env_str
from governance.lib.months import Month

MONTH = Month(2001, 1)
TRIES = 3
MODEL = "BENCH GPU"
DAYS_PER_JOB = 10

# A cluster of `gpus` GPUs (8 a node) that declares them, a rate card, one job per GPU for ten days starting on one
# of the month's first 20 days, and for each job-day one hour of rollups (job and GPU).
FLEET = """
INSERT INTO org_team (slug, name, lead_email, created_at) VALUES ('bench-price', 'Bench', '', now());
INSERT INTO org_project (team_id, slug, name, created_at)
SELECT id, 'bench-price', 'Bench', now() FROM org_team WHERE slug = 'bench-price';
INSERT INTO fleet_cluster (name, unallocated_policy, created_at) VALUES (%(cluster)s, 'show', now());
INSERT INTO fleet_node (cluster_id, name)
SELECT c.id, 'n' || n FROM fleet_cluster c, generate_series(0, (%(gpus)s - 1) / 8) AS n WHERE c.name = %(cluster)s;
INSERT INTO fleet_gpu (cluster_id, node_id, uuid, index, model, memory_total_mib, mig_profile, first_seen_at,
                       last_seen_at, unconfirmed)
SELECT n.cluster_id, n.id, 'GPU-' || i, i %% 8, %(model)s, 81559, '', %(start)s, %(last_seen)s, false
FROM generate_series(0, %(gpus)s - 1) AS i
JOIN fleet_node n ON n.name = 'n' || (i / 8) AND n.cluster_id = (SELECT id FROM fleet_cluster WHERE name = %(cluster)s);
INSERT INTO costs_declaredcapacity (cluster_id, gpu_model, count, valid_from, created_at)
SELECT id, %(model)s, %(gpus)s, %(start)s, now() FROM fleet_cluster WHERE name = %(cluster)s;
INSERT INTO costs_ratecard (gpu_model, price_per_gpu_hour, currency, valid_from, created_at)
VALUES (%(model)s, 2.5, 'USD', %(start)s, now());
"""
MONTH_JOBS = """
INSERT INTO usage_job (cluster_id, external_id, user_name, account, team_name, project_id, gpus, gpu_model,
                       submit_time, start_time, end_time, state, labels, described, updated_at)
SELECT c.id, 'b' || i, 'user-' || (i %% 97), 'bench-price', 'bench', p.id, 1, %(model)s,
       %(start)s::timestamptz + (i %% 20) * interval '1 day', %(start)s::timestamptz + (i %% 20) * interval '1 day',
       %(start)s::timestamptz + (i %% 20 + %(days)s) * interval '1 day', 'completed', '{}', true, now()
FROM generate_series(0, %(gpus)s - 1) AS i, fleet_cluster c, org_project p
WHERE c.name = %(cluster)s AND p.slug = 'bench-price';
CREATE TEMP TABLE bench_held ON COMMIT DROP AS
SELECT j.id AS job_id, g.id AS gpu_id, j.start_time + d * interval '1 day' + interval '12 hours' AS hour, i
FROM usage_job j
JOIN fleet_gpu g ON g.cluster_id = j.cluster_id AND g.uuid = 'GPU-' || substr(j.external_id, 2),
     generate_series(0, %(days)s - 1) AS d, LATERAL (SELECT substr(j.external_id, 2)::int AS i) AS k
WHERE j.cluster_id = (SELECT id FROM fleet_cluster WHERE name = %(cluster)s);
"""
ROLLUPS = """
INSERT INTO usage_jobgpuhour (job_id, gpu_id, hour, samples, idle_samples, sm_sum, sm_max, sm_sq_sum, mem_used_max,
    mem_total_mib, power_sum, power_samples, numa_mismatch_samples, io_wait_sum, io_wait_samples, host_cpu_sum,
    host_cpu_samples, tensor_sum, tensor_samples, sm_samples)
SELECT job_id, gpu_id, hour, 60, 6 * (i %% 3), 600 * (1 + i %% 9), 95, 60000, 1000 + 800 * (i %% 90), 81559,
       30000, 60, 0, 0, 0, 0, 0, 0, 0, 60
FROM bench_held;
INSERT INTO usage_gpuhour (gpu_id, hour, samples, allocated_samples, sm_samples, idle_samples, sm_sum, mem_used_max,
                           power_sum, power_samples)
SELECT gpu_id, hour, 60, 60, 60, 6 * (i %% 3), 600 * (1 + i %% 9), 1000 + 800 * (i %% 90), 30000, 60 FROM bench_held;
"""
# What ingest marks for those rollups: the job-days (ingest appends one mark per job-day its batch touched).
MARK = """
INSERT INTO usage_pricingmark (job_id, cluster_id, day, created_at)
SELECT h.job_id, g.cluster_id, h.hour::date, now() FROM bench_held h JOIN fleet_gpu g ON g.id = h.gpu_id;
"""

# The seeded tables' statistics, as a fleet's tables have them (autovacuum never sees rows a transaction holds).
ANALYZE = (
    "ANALYZE fleet_node; ANALYZE fleet_gpu; ANALYZE usage_job; ANALYZE usage_jobgpuhour; ANALYZE usage_gpuhour;"
    " ANALYZE usage_pricingmark"
)


class _Rollback(Exception):
    pass


def _sizes() -> list[int]:
    return [int(part) for part in env_str("GOVERNANCE_BENCH_PRICING_GPUS", "2560,25600").split(",") if part.strip()]


def _execute(sql: str, params: dict) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _params(gpus: int, cluster: str, start: datetime, last_seen: datetime) -> dict:
    return {"gpus": gpus, "cluster": cluster, "model": MODEL, "start": start, "last_seen": last_seen,
            "days": DAYS_PER_JOB}  # fmt: skip


def run(out: Out) -> None:
    if connection.vendor != "postgresql":
        out("pricing", "skipped (needs PostgreSQL)")
        return
    paces: dict[str, dict[int, float]] = {"reprice_job_days_per_s": {}, "findings_jobs_per_s": {}}
    for gpus in _sizes():
        try:
            with transaction.atomic():
                _month(out, gpus, paces)
                raise _Rollback
        except _Rollback:
            pass
    for name, by_size in paces.items():
        sizes = sorted(by_size)
        if len(sizes) >= 2:
            out(f"{name}_pace_{sizes[-1] // sizes[0]}x", ratio(by_size[sizes[-1]], by_size[sizes[0]]))
    try:
        with transaction.atomic():
            _fleet_hour(out, env_int("GOVERNANCE_BENCH_FLEET_HOUR_GPUS", 100_000))
            raise _Rollback
    except _Rollback:
        pass


def _month(out: Out, gpus: int, paces: dict[str, dict[int, float]]) -> None:
    start = MONTH.start
    began = time.perf_counter()
    params = _params(gpus, f"bench-{gpus}", start, MONTH.end - timedelta(hours=1))
    _execute(FLEET + MONTH_JOBS + ROLLUPS + MARK, params)
    _execute(ANALYZE, {})
    out(f"pricing_seed_{gpus}_s", round(time.perf_counter() - began, 1))

    now = MONTH.end + timedelta(days=1)
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM usage_job WHERE external_id LIKE 'b%%' ORDER BY id")
        ids = [pk for (pk,) in cursor.fetchall()]
    priced = evaluated = 0.0
    for attempt in range(TRIES):
        marked = transaction.savepoint()
        began = time.perf_counter()
        done = charges_reprice(now=now)
        priced = max(priced, done.job_days / (time.perf_counter() - began))
        began = time.perf_counter()
        jobs = findings_evaluate(job_ids=ids, now=now).jobs
        evaluated = max(evaluated, jobs / (time.perf_counter() - began))
        if attempt < TRIES - 1:
            transaction.savepoint_rollback(marked)  # the month marked and unpriced again, for the next try
    out(f"reprice_job_days_{gpus}", done.job_days)
    paces["reprice_job_days_per_s"][gpus] = priced
    out(f"reprice_job_days_per_s_{gpus}", round(priced))
    paces["findings_jobs_per_s"][gpus] = evaluated
    out(f"findings_jobs_per_s_{gpus}", round(evaluated))
    out(f"pricing_tries_{gpus}", f"{TRIES} (best counts)")

    began = time.perf_counter()
    statement_close(month=MONTH, now=now)
    out(f"close_month_{gpus}_s", round(time.perf_counter() - began, 1))


def _fleet_hour(out: Out, gpus: int) -> None:
    """`gpus` GPUs, 8-GPU jobs running since the day began, one hour of rollups landed and marked."""
    hour = datetime(2001, 2, 10, 14, tzinfo=UTC)
    began = time.perf_counter()
    params = _params(gpus, "bench-fleet", hour - timedelta(days=30), hour + timedelta(minutes=59))
    _execute(FLEET, params)
    _execute(
        """
        INSERT INTO usage_job (cluster_id, external_id, user_name, account, team_name, project_id, gpus, gpu_model,
                               submit_time, start_time, end_time, state, labels, described, updated_at)
        SELECT n.cluster_id, n.name, 'user-' || (n.id %% 97), 'bench-price', 'bench', p.id, 8, %(model)s,
               %(day)s, %(day)s, NULL, 'running', '{}', true, now()
        FROM fleet_node n, org_project p
        WHERE n.cluster_id = (SELECT id FROM fleet_cluster WHERE name = %(cluster)s) AND p.slug = 'bench-price';
        CREATE TEMP TABLE bench_held ON COMMIT DROP AS
        SELECT j.id AS job_id, g.id AS gpu_id, %(hour)s::timestamptz AS hour, g.id AS i
        FROM usage_job j JOIN fleet_node n ON n.cluster_id = j.cluster_id AND n.name = j.external_id
        JOIN fleet_gpu g ON g.node_id = n.id
        WHERE j.cluster_id = (SELECT id FROM fleet_cluster WHERE name = %(cluster)s);
        """
        + ROLLUPS
        + MARK
        + "INSERT INTO usage_pricingmark (job_id, cluster_id, day, created_at)"
        " SELECT NULL, id, %(hour)s::date, now() FROM fleet_cluster WHERE name = %(cluster)s;",
        {**params, "hour": hour, "day": hour.replace(hour=0)},
    )
    _execute(ANALYZE, {})
    out("price_fleet_hour_seed_s", round(time.perf_counter() - began, 1))
    began = time.perf_counter()
    done = charges_reprice(now=hour + timedelta(hours=1, minutes=1))
    out("price_fleet_hour_job_days", done.job_days)
    name = f"{gpus // 1000}k" if gpus % 1000 == 0 else str(gpus)
    out(f"price_fleet_hour_{name}_s", round(time.perf_counter() - began, 1))
