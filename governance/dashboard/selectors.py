"""Reads for the dashboard: rollups only (GpuHour, JobGpuHour, jobs, chargeback), never raw samples.

Team totals go through teams_visible, single jobs through job_visibility_filter; cluster-wide
utilisation is shown to everyone signed in.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Count, DurationField, ExpressionWrapper, F, FloatField, Max, Q, Sum
from django.db.models.functions import Cast

from governance.costs.models import Charge
from governance.costs.selectors import UNATTRIBUTED, TeamCharge, chargeback_months
from governance.dashboard.boxes import Box, box_of
from governance.lib.months import Month
from governance.lib.replica import reading_connection
from governance.org.models import Team, User
from governance.org.selectors import job_visibility_filter, teams_visible
from governance.usage.models import ClusterHour, Job, JobGpuHour

TOP_JOBS = 10


@dataclass(frozen=True)
class UtilisationHour:
    hour: datetime
    used_gpu_hours: float
    capacity_gpu_hours: float


@dataclass(frozen=True)
class TeamIdle:
    team: str
    idle_gpu_hours: float
    observed_gpu_hours: float


@dataclass(frozen=True)
class JobWaste:
    job_pk: int
    job: str
    team: str
    user: str
    gpus: Decimal | int | None
    idle_gpu_hours: float
    idle_cost: Decimal
    currency: str


def _visible_team_names(user: User, team: Team | None) -> set[str]:
    teams = teams_visible(user=user)
    if team is not None:
        teams = teams.filter(pk=team.pk)
    names = set(teams.values_list("name", flat=True))
    if team is None and user.sees_all_costs:
        names.add(UNATTRIBUTED)
    return names


def _team_jobs_q(user: User, team: Team | None, prefix: str = "") -> Q:
    """Jobs counted in the totals of the teams the user may see (unattributed: admins and finance only)."""
    if team is None and user.sees_all_costs:
        return Q()
    visible = teams_visible(user=user)
    if team is not None:
        visible = visible.filter(pk=team.pk)
    return Q(**{f"{prefix}project__team__in": visible})


def _team_name(name: str | None) -> str:
    return name or UNATTRIBUTED


def cluster_utilisation(*, start: datetime, end: datetime, cluster_id: int | None = None) -> list[UtilisationHour]:
    """Per hour: utilisation-weighted GPU-hours (mean SM of each GPU) and capacity (GPUs reporting), from the
    per cluster-hour rollup."""
    hours = ClusterHour.objects.filter(hour__gte=start, hour__lt=end)
    if cluster_id is not None:
        hours = hours.filter(cluster_id=cluster_id)
    rows = hours.values("hour").annotate(used=Sum("used_gpu_hours"), capacity=Sum("gpus")).order_by("hour")
    return [UtilisationHour(r["hour"], float(r["used"] or 0.0), float(r["capacity"])) for r in rows]


def team_charges(*, user: User, months: list[Month], team: Team | None = None) -> list[TeamCharge]:
    """Chargeback per team and month, only for the teams the user may see."""
    names = _visible_team_names(user, team)
    return [c for c in chargeback_months(months=months) if c.team in names]


def team_idle(
    *, user: User, start: datetime, end: datetime, cluster_id: int | None = None, team: Team | None = None
) -> list[TeamIdle]:
    """Per visible team: GPU-hours its jobs held while idle, of the GPU-hours observed."""
    hours = JobGpuHour.objects.filter(_team_jobs_q(user, team, "job__"), hour__gte=start, hour__lt=end, samples__gt=0)
    if cluster_id is not None:
        hours = hours.filter(job__cluster_id=cluster_id)
    rows = (
        hours.values("job__project__team__name")
        .annotate(idle=Sum(Cast("idle_samples", FloatField()) / Cast("samples", FloatField())), hours=Count("id"))
        .order_by("job__project__team__name")
    )
    return [TeamIdle(_team_name(r["job__project__team__name"]), float(r["idle"]), float(r["hours"])) for r in rows]


# Per team: the quartiles of the waits (linear interpolation, as statistics.quantiles' "inclusive"), then the
# whiskers (the furthest waits within 1.5 x the interquartile range) and the count, in one statement, so the page
# reads a row per team, not a row per job started in the range. Grouped by team id (0: none), so that the waits
# meet their team's fences by a hash join on an integer; the names are joined to the few rows at the end.
QUEUE_WAIT_BOXES = """
WITH w AS (
    SELECT COALESCE(team, 0) AS team, GREATEST(EXTRACT(EPOCH FROM wait)::float8, 0) / 60 AS m
    FROM ({jobs}) AS s (team, wait)
), q AS (
    SELECT team, p[1] AS q1, p[2] AS median, p[3] AS q3, p[1] - 1.5 * (p[3] - p[1]) AS low,
           p[3] + 1.5 * (p[3] - p[1]) AS high
    FROM (SELECT team, percentile_cont(ARRAY[0.25, 0.5, 0.75]) WITHIN GROUP (ORDER BY m) AS p FROM w GROUP BY team) x
), b AS (
    SELECT q.team, min(w.m) FILTER (WHERE w.m >= q.low) AS low, max(w.m) FILTER (WHERE w.m <= q.high) AS high,
           count(*) AS n
    FROM q JOIN w ON w.team = q.team GROUP BY q.team
)
SELECT t.name, q.q1, q.median, q.q3, b.low, b.high, b.n
FROM q JOIN b ON b.team = q.team LEFT JOIN {teams} t ON t.id = q.team
"""


def queue_waits(
    *, user: User, start: datetime, end: datetime, cluster_id: int | None = None, team: Team | None = None
) -> dict[str, Box | None]:
    """Minutes from submit to start of the jobs that started in the range, as a box per visible team."""
    jobs = Job.objects.filter(
        _team_jobs_q(user, team), start_time__gte=start, start_time__lt=end, submit_time__isnull=False
    )
    if cluster_id is not None:
        jobs = jobs.filter(cluster_id=cluster_id)
    waited = ExpressionWrapper(F("start_time") - F("submit_time"), output_field=DurationField())
    db = reading_connection(Job)
    if db.vendor == "postgresql":
        pairs = jobs.order_by().values_list("project__team_id", waited)
        sql, params = pairs.query.get_compiler(using=db.alias).as_sql()
        with db.cursor() as cursor:
            cursor.execute(QUEUE_WAIT_BOXES.format(jobs=sql, teams=Team._meta.db_table), params)
            rows = cursor.fetchall()
        return dict(sorted((_team_name(name), Box(*numbers)) for name, *numbers in rows))
    pairs = jobs.order_by().values_list("project__team__name", waited)
    waits: dict[str, list[float]] = defaultdict(list)
    for name, wait in pairs:
        waits[_team_name(name)].append(max(wait.total_seconds(), 0.0) / 60)
    return {name: box_of(values) for name, values in sorted(waits.items())}


def jobs_top_waste(
    *,
    user: User,
    start: datetime,
    end: datetime,
    cluster_id: int | None = None,
    team: Team | None = None,
    limit: int = TOP_JOBS,
) -> list[JobWaste]:
    """The visible jobs that held GPUs idle longest in the range, with what that idle time cost.

    Ranked by idle GPU-hours from the rollups, priced from the ledger's idle cost of the job's rows in the range;
    pages call this function only, so the ranking can switch to findings' waste in one place.
    """
    rows = JobGpuHour.objects.filter(
        job_visibility_filter(user=user, prefix="job__"), hour__gte=start, hour__lt=end, samples__gt=0
    )
    if team is not None:
        rows = rows.filter(job__project__team=team)
    if cluster_id is not None:
        rows = rows.filter(job__cluster_id=cluster_id)
    ranked = list(
        rows.values("job_id")
        .annotate(idle=Sum(Cast("idle_samples", FloatField()) / Cast("samples", FloatField())))
        .filter(idle__gt=0)
        .order_by("-idle", "job_id")[:limit]
    )
    jobs = Job.objects.select_related("cluster", "project__team").in_bulk([r["job_id"] for r in ranked])
    # The idle time's money is the ledger's (each day at its own rate, a MIG slice at its fraction), never more
    # than the job's bill for the range.
    ledger: dict[int, Mapping[str, Any]] = {
        row["job_id"]: row
        for row in Charge.objects.filter(
            kind=Charge.Kind.USAGE, job_id__in=list(jobs), period_start__gte=start, period_start__lt=end
        )
        .values("job_id")
        .annotate(idle_cost=Sum("idle_cost"), currency=Max("currency"))
    }
    out = []
    for r in ranked:
        job = jobs[r["job_id"]]
        priced = ledger.get(job.pk, {})
        out.append(
            JobWaste(
                job_pk=job.pk,
                job=f"{job.cluster.name}/{job.external_id}",
                team=job.project.team.name if job.project else UNATTRIBUTED,
                user=job.user_name,
                gpus=job.gpus,
                idle_gpu_hours=float(r["idle"]),
                idle_cost=priced.get("idle_cost") or Decimal(0),
                currency=priced.get("currency") or "",
            )
        )
    return out


def gpu_holders(*, user: User, cluster_id: int, start: datetime, end: datetime) -> dict[str, str]:
    """Per GPU label (node:index), the job that held it longest in the range and its team, as "job (team)";
    "+N" when others held it too. Only jobs the user may see are named; another's is "a job you may not see"."""
    rows = (
        JobGpuHour.objects.filter(job__cluster_id=cluster_id, hour__gte=start, hour__lt=end, samples__gt=0)
        .values("gpu__node__name", "gpu__index", "job_id")
        .annotate(hours=Count("id"))
        .order_by()
    )
    held: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r in rows:
        held[f"{r['gpu__node__name']}:{r['gpu__index']}"].append((r["hours"], r["job_id"]))
    ids = {job_id for jobs in held.values() for _, job_id in jobs}
    visible = {
        pk: (external_id, team or UNATTRIBUTED)
        for pk, external_id, team in Job.objects.filter(job_visibility_filter(user=user), pk__in=ids).values_list(
            "pk", "external_id", "project__team__name"
        )
    }
    out = {}
    for label, jobs in held.items():
        jobs.sort(key=lambda hj: (-hj[0], hj[1]))
        top = jobs[0][1]
        name = f"job {visible[top][0]} ({visible[top][1]})" if top in visible else "a job you may not see"
        out[label] = name + (f" +{len(jobs) - 1}" if len(jobs) > 1 else "")
    return out
