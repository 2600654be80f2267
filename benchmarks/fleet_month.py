"""A month of a large fleet written straight into the tables the pages read (fleet, jobs, the node and cluster
utilisation rollups, the ledger and its summary) by INSERT ... SELECT in the database, what pricing and ingest
would have left, in the time a bench can spend. No GPU-hours: at 25,600 GPUs a month is 19 million of them and no
page reads them (the heatmap's drill-down to one node would). Eight GPUs a node, each node's GPUs held for the
month by one job of one of eight teams, each node's SM mean varying by node and hour; capacity declared, so the
ledger reconciles (every GPU-hour billed, nothing unallocated)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.db import connection

from governance.costs.models import DeclaredCapacity, RateCard
from governance.costs.summaries import ledger_days_rebuild
from governance.dashboard.grid import HOURLY_READ
from governance.fleet.models import Cluster
from governance.lib.months import Month
from governance.org.models import Project, Team

RATE = Decimal("2.50")
TEAMS = 8

FLEET = """
INSERT INTO fleet_node (cluster_id, name) SELECT %(c)s, 'node-' || lpad(i::text, 5, '0')
FROM generate_series(0, %(nodes)s - 1) AS i;
INSERT INTO fleet_gpu (cluster_id, node_id, uuid, index, model, memory_total_mib, mig_profile, first_seen_at,
                       last_seen_at)
SELECT %(c)s, n.id, 'GPU-' || %(c)s || '-' || n.name || '-' || k, k, %(model)s, 81559, '', %(start)s, %(end)s
FROM fleet_node n, generate_series(0, 7) AS k WHERE n.cluster_id = %(c)s;
INSERT INTO usage_job (cluster_id, external_id, user_name, account, team_name, project_id, gpus, gpu_model,
                       submit_time, start_time, end_time, state, labels, described, updated_at)
SELECT %(c)s, n.name, 'user-' || (n.id %% 97), '', '', (%(projects)s::int8[])[1 + n.id %% %(teams)s], 8, %(model)s,
       %(start)s, %(start)s, %(end)s, 'completed', '{}', true, now()
FROM fleet_node n WHERE n.cluster_id = %(c)s;
"""
# The node rollups as ingest folds them from hourly samples (one a GPU-hour, so a node-hour holds 8), and the
# cluster-hours as the pricing pass sums them: SM differs by node and hour. Node-hours only where the heatmap
# reads them (`hourly`): a month of nodes beyond its hourly budget is drawn from node-days.
NODE_SM = "((n.id * 37 + extract(hour FROM h)::int) %% 100)::float8"
NODE_HOURS = f"""
SELECT n.id AS node_id, h AS hour, 8 AS samples, 8 AS sm_samples, 8 * {NODE_SM} AS sm_sum
FROM fleet_node n, generate_series(%(start)s::timestamptz, %(end)s::timestamptz - interval '1 hour',
                                   interval '1 hour') AS h
WHERE n.cluster_id = %(c)s
"""
ROLLUPS = f"""
INSERT INTO usage_nodeday (node_id, day, samples, sm_samples, sm_sum)
SELECT node_id, (hour AT TIME ZONE 'UTC')::date, sum(samples), sum(sm_samples), sum(sm_sum) FROM ({NODE_HOURS}) x
GROUP BY 1, 2;
INSERT INTO usage_clusterhour (cluster_id, hour, gpus, used_gpu_hours)
SELECT %(c)s, hour, sum(samples), sum(sm_sum) / 100.0 FROM ({NODE_HOURS}) x GROUP BY hour;
"""
HOURLY = f"INSERT INTO usage_nodehour (node_id, hour, samples, sm_samples, sm_sum) {NODE_HOURS}"
# One usage row per job and day, as pricing writes it; and each day's capacity.
LEDGER = """
INSERT INTO costs_charge (kind, month, day, period_start, period_end, cluster_id, cluster_name, job_id, job_ref,
    user_name, team_id, team_name, project_id, project_name, gpu_model, mig_profile, gpu_hours, used_gpu_hours,
    idle_gpu_hours, cost, list_cost, contracted_cost, billed_cost, idle_cost, energy_kwh, energy_cost, currency,
    at_default_rate, corrects, corrected_kind, reason, priced_at)
SELECT 'usage', %(month)s, d::date, d, d + interval '1 day', j.cluster_id, %(name)s, j.id, j.external_id,
       j.user_name, p.team_id, t.name, p.id, p.name, %(model)s, '', 192, 96, 19.2, 192 * %(rate)s, 192 * %(rate)s,
       192 * %(rate)s, 192 * %(rate)s, 19.2 * %(rate)s, 86.4, 0, 'USD', false, NULL, '', '', now()
FROM usage_job j JOIN org_project p ON p.id = j.project_id JOIN org_team t ON t.id = p.team_id,
     generate_series(%(start)s::timestamptz, %(end)s::timestamptz - interval '1 day', interval '1 day') AS d
WHERE j.cluster_id = %(c)s;
INSERT INTO costs_capacityday (cluster_id, day, gpu_model, gpu_hours, cost, priced_until)
SELECT %(c)s, d::date, %(model)s, %(gpus)s * 24, %(gpus)s * 24 * %(rate)s, d + interval '1 day'
FROM generate_series(%(start)s::timestamptz, %(end)s::timestamptz - interval '1 day', interval '1 day') AS d;
"""


def fleet_month_write(*, gpus: int, month: Month, cluster: str, model: str) -> Cluster:
    """Write the month (in the caller's transaction); returns the cluster."""
    if gpus % 8:
        raise ValueError("gpus must be a multiple of 8 (eight a node)")
    RateCard.objects.get_or_create(
        gpu_model=model, cluster=None, valid_from=month.previous().start,
        defaults={"price_per_gpu_hour": RATE, "currency": "USD"},
    )  # fmt: skip
    row = Cluster.objects.create(name=cluster)
    DeclaredCapacity.objects.create(cluster=row, gpu_model=model, count=gpus, valid_from=month.previous().start)
    projects = []
    for n in range(TEAMS):
        team = Team.objects.create(slug=f"{cluster}-t{n}", name=f"{cluster} team {n}")
        projects.append(Project.objects.create(team=team, slug=f"{cluster}-p{n}", name=f"project {n}").pk)
    params = {
        "c": row.pk, "nodes": gpus // 8, "gpus": gpus, "model": model, "start": month.start, "end": month.end,
        "projects": projects, "teams": TEAMS, "month": month.start.date(), "name": cluster, "rate": RATE,
    }  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(FLEET, params)
        cursor.execute(ROLLUPS, params)
        if gpus // 8 * (month.end - month.start) / timedelta(hours=1) <= HOURLY_READ:
            cursor.execute(HOURLY, params)
        cursor.execute(LEDGER, params)
    ledger_days_rebuild()
    return row
