"""Spend anomalies: daily sums from the ledger per team and project, scored against their recent normal.

A detection pass judges the last GOVERNANCE_ANOMALY_LOOKBACK_DAYS whole days (re-running it changes nothing: one
record per team, project, day and metric), then hands the new records to the notification outbox.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from governance.costs.models import Anomaly, Charge
from governance.lib.anomaly import outliers
from governance.notify.services import notification_enqueue

# The outbox of governance/notify (branch `waste`) delivers what is queued under this task name.
# Below these, a jump is noise whatever its score: money in the ledger's currency, GPU-hours, share points.
FLOORS: dict[str, float] = {Anomaly.Metric.SPEND: 1.0, Anomaly.Metric.GPU_HOURS: 1.0, Anomaly.Metric.IDLE_SHARE: 0.05}


def _series(first: date, last: date) -> dict[tuple[int, int | None], dict[date, list[float]]]:
    """(team, project or None) -> day -> [cost, idle cost, GPU-hours], from usage and shares (one aggregate)."""
    out: dict[tuple[int, int | None], dict[date, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0] * 3))
    rows = (
        Charge.objects.filter(day__gte=first, day__lte=last, team_id__isnull=False)
        .exclude(kind__in=["unallocated", "adjustment"])
        .values("team_id", "project_id", "day")
        .annotate(cost=Sum("cost"), idle=Sum("idle_cost"), hours=Sum("gpu_hours"))
        .order_by()
    )
    for r in rows:
        amounts = [float(r["cost"] or 0), float(r["idle"] or 0), float(r["hours"] or 0)]
        keys = [(r["team_id"], None)] + ([(r["team_id"], r["project_id"])] if r["project_id"] else [])
        for key in keys:
            day = out[key][r["day"]]
            for i, amount in enumerate(amounts):
                day[i] += amount
    return out


def _metrics(days: list[date], values: dict[date, list[float]]) -> dict[str, list[tuple[date, float]]]:
    """The three daily series of a team (project), from its first day with charges: the days before it existed
    are no normal to compare with."""
    days = [d for d in days if d >= min(values)]
    spend = [(d, values.get(d, [0.0] * 3)[0]) for d in days]
    hours = [(d, values.get(d, [0.0] * 3)[2]) for d in days]
    idle = [(d, values[d][1] / values[d][0]) for d in days if d in values and values[d][0] > 0]
    return {Anomaly.Metric.SPEND: spend, Anomaly.Metric.GPU_HOURS: hours, Anomaly.Metric.IDLE_SHARE: idle}


def anomalies_detect(*, now: datetime | None = None) -> list[Anomaly]:
    """Record the anomalies of the last whole days; returns the new ones (already recorded ones are skipped)."""
    now = now or timezone.now()
    window, lookback = settings.GOVERNANCE_ANOMALY_WINDOW_DAYS, settings.GOVERNANCE_ANOMALY_LOOKBACK_DAYS
    last = (now - timedelta(days=1)).date()
    judged = {last - timedelta(days=i) for i in range(lookback)}
    first = last - timedelta(days=window + lookback)
    days = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    found = []
    for (team_id, project_id), values in _series(first, last).items():
        for metric, series in _metrics(days, values).items():
            for o in outliers(
                series,
                window=window,
                min_days=settings.GOVERNANCE_ANOMALY_MIN_DAYS,
                threshold=settings.GOVERNANCE_ANOMALY_THRESHOLD,
                floor=FLOORS[metric],
                days=judged,
            ):
                found.append(Anomaly(team_id=team_id, project_id=project_id, day=o.day, metric=metric,
                                     value=Decimal(f"{o.value:.6f}"), baseline=Decimal(f"{o.baseline:.6f}"),
                                     score=o.score, window_days=window))  # fmt: skip
    with transaction.atomic():
        before = set(Anomaly.objects.filter(day__in=judged).values_list("pk", flat=True))
        Anomaly.objects.bulk_create(found, ignore_conflicts=True)
        new = list(Anomaly.objects.filter(day__in=judged).exclude(pk__in=before).order_by("pk"))
        if new:
            anomalies_announce(ids=[a.pk for a in new])
    return new


def anomalies_announce(*, ids: list[int]) -> None:
    """Each new anomaly goes through the notification outbox like findings and budget alerts (one row per
    destination, delivered with retries after the commit)."""
    for a in Anomaly.objects.filter(pk__in=ids).select_related("team", "project").order_by("pk"):
        where = f"{a.team.name}" + (f" / {a.project.name}" if a.project else "")
        payload = {
            "anomaly": a.pk, "team": a.team.slug, "project": a.project.slug if a.project else None,
            "day": a.day.isoformat(), "metric": a.metric, "value": str(a.value), "baseline": str(a.baseline),
            "score": round(a.score, 2),
        }  # fmt: skip
        text = f"{where}: {a.get_metric_display()} on {a.day} was {a.value} against a usual {a.baseline}"
        notification_enqueue(event="anomaly.detected", payload=payload, text=text)


def team_anomalies(*, team_id: int, first: date, last: date) -> list[Anomaly]:
    """A team's anomalies between two days (its projects' too), newest first."""
    rows = Anomaly.objects.filter(team_id=team_id, day__gte=first, day__lte=last).select_related("project")
    return list(rows.order_by("-day", "metric", "id")[:50])
