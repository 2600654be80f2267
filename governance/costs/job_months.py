"""Keeps `JobMonth` (each job's usage rows of a month, summed) equal to the ledger, for the cluster-days a pass
wrote: the jobs with usage rows on those days, and those whose rows spanned them before (a job whose rows there
were removed), are summed again over their whole month. governance/costs/summaries.py calls it with `LedgerDay`."""

from __future__ import annotations

from collections import Counter
from datetime import date

from django.db import connection
from django.db.models import Count, Max, Min, Q, Sum

from governance.costs.models import Charge, JobMonth
from governance.lib.cluster_days import days_by_cluster

KEY = (
    "month", "job_id", "job_ref", "cluster_id", "cluster_name", "team_id", "team_name", "project_name", "user_name",
    "currency",
)  # fmt: skip
AMOUNTS = ("gpu_hours", "used_gpu_hours", "idle_gpu_hours", "cost", "idle_cost")
USAGE = Q(kind="usage", job__isnull=False)
_COLUMNS = ", ".join((*KEY, "first_day", "last_day", "rows", "job_rows", *AMOUNTS))
# job_rows: the job-month's groups, counted over the groups (a window over the grouped rows).
_SELECT = ", ".join(
    [f"c.{k}" for k in KEY]
    + ["min(c.day)", "max(c.day)", "count(*)", "count(*) OVER (PARTITION BY c.job_id, c.month)"]
    + [f"sum(c.{a})" for a in AMOUNTS]
)
_GROUP = ", ".join(f"c.{k}" for k in KEY)
# One statement: the job-months to sum again are found before the delete, which sees none of the rows inserted.
# A job-month's rows are read by their days (a usage row's month is its day's), which only the (job, day) indexes
# serve: with `c.month = jobs.month` PostgreSQL, short of statistics (a ledger grown since its last ANALYZE, or a
# new month), read the whole month's index once for every job (a 25,600-GPU month's pass: minutes, not seconds).
REFRESH = f"""
WITH k AS (SELECT * FROM unnest(%(clusters)s::int8[], %(days)s::date[]) AS k(cluster_id, day)),
jobs AS (
    SELECT c.job_id, c.month FROM costs_charge c JOIN k ON c.cluster_id = k.cluster_id AND c.day = k.day
    WHERE c.kind = 'usage' AND c.job_id IS NOT NULL
    UNION
    SELECT j.job_id, j.month FROM costs_jobmonth j JOIN k ON j.cluster_id = k.cluster_id
    AND k.day BETWEEN j.first_day AND j.last_day
),
gone AS (DELETE FROM costs_jobmonth j USING jobs WHERE j.job_id = jobs.job_id AND j.month = jobs.month)
INSERT INTO costs_jobmonth ({_COLUMNS})
SELECT {_SELECT} FROM costs_charge c
JOIN jobs ON c.job_id = jobs.job_id AND c.day >= jobs.month AND c.day < (jobs.month + interval '1 month')::date
WHERE c.kind = 'usage'
GROUP BY {_GROUP}
"""  # noqa: S608


def job_months_refresh(keys: list[tuple[int, date]]) -> None:
    """Sum again the job-months these (cluster id, day) pairs touch. Runs in the caller's transaction."""
    if not keys:
        return
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(REFRESH, {"clusters": [c for c, _ in keys], "days": [d for _, d in keys]})
        return
    touched = Q()
    spanned = Q()
    for cid, days in days_by_cluster(keys).items():
        touched |= Q(cluster_id=cid, day__in=days)
        for day in days:
            spanned |= Q(cluster_id=cid, first_day__lte=day, last_day__gte=day)
    pairs = set(Charge.objects.filter(USAGE, touched).values_list("job_id", "month"))
    pairs |= set(JobMonth.objects.filter(spanned).values_list("job_id", "month"))
    for job_id, month in pairs:
        JobMonth.objects.filter(job_id=job_id, month=month).delete()
        _insert(Charge.objects.filter(USAGE, job_id=job_id, month=month))


def job_months_rebuild() -> None:
    """Sum every job-month again from the ledger."""
    JobMonth.objects.all().delete()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO costs_jobmonth ({_COLUMNS}) SELECT {_SELECT} FROM costs_charge c"  # noqa: S608
                f" WHERE c.kind = 'usage' AND c.job_id IS NOT NULL GROUP BY {_GROUP}"
            )
        return
    _insert(Charge.objects.filter(USAGE))


def _insert(rows) -> None:
    groups = (
        rows.values(*KEY)
        .annotate(n=Count("id"), first=Min("day"), last=Max("day"), **{f"s_{a}": Sum(a) for a in AMOUNTS})
        .order_by()
    )
    groups = list(groups)
    per_job = Counter((g["job_id"], g["month"]) for g in groups)
    JobMonth.objects.bulk_create(
        [JobMonth(**{k: g[k] for k in KEY}, first_day=g["first"], last_day=g["last"], rows=g["n"],
                  job_rows=per_job[g["job_id"], g["month"]], **{a: g[f"s_{a}"] for a in AMOUNTS}) for g in groups],
        batch_size=2000,
    )  # fmt: skip
