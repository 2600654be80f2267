"""Keeps the per cluster-hour utilisation rollup (`ClusterHour`) equal to the GPU-hours it sums: each pricing pass
re-sums the cluster-days ingest marked, whole, in its own transaction."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

from django.db import connection
from django.db.models import Count, F, FloatField, Q, Sum
from django.db.models.functions import Cast, NullIf

from governance.lib.cluster_days import CLUSTER_DAYS, cluster_days_run, days_by_cluster
from governance.usage.models import ClusterHour, GpuHour

KEYS = CLUSTER_DAYS
DELETE = f"""
DELETE FROM usage_clusterhour c USING {KEYS}
WHERE c.cluster_id = k.cluster_id AND c.hour >= k.day::timestamp AT TIME ZONE 'UTC'
AND c.hour < (k.day + 1)::timestamp AT TIME ZONE 'UTC'
"""  # noqa: S608
INSERT = f"""
INSERT INTO usage_clusterhour (cluster_id, hour, gpus, used_gpu_hours)
SELECT k.cluster_id, h.hour, count(*), coalesce(sum(h.sm_sum / nullif(h.sm_samples, 0)::float8 / 100.0), 0)
FROM {KEYS} JOIN fleet_gpu g ON g.cluster_id = k.cluster_id
JOIN usage_gpuhour h ON h.gpu_id = g.id AND h.hour >= k.day::timestamp AT TIME ZONE 'UTC'
AND h.hour < (k.day + 1)::timestamp AT TIME ZONE 'UTC'
WHERE h.samples > 0
GROUP BY k.cluster_id, h.hour
"""  # noqa: S608


def cluster_hours_refresh(keys: Iterable[tuple[int, date]]) -> None:
    """Re-sum the hours of these (cluster id, day) pairs from the GPU-hours. Runs in the caller's transaction."""
    keys = sorted(set(keys))
    if not keys:
        return
    if connection.vendor == "postgresql":
        cluster_days_run([DELETE, INSERT], keys)
        return
    for cid, days in days_by_cluster(keys).items():
        for day in sorted(days):
            start = datetime(day.year, day.month, day.day, tzinfo=UTC)
            span = Q(hour__gte=start, hour__lt=start + timedelta(days=1))
            ClusterHour.objects.filter(span, cluster_id=cid).delete()
            rows = (
                GpuHour.objects.filter(span, gpu__cluster_id=cid, samples__gt=0)
                .values("hour")
                .annotate(used=Sum(F("sm_sum") / Cast(NullIf("sm_samples", 0), FloatField()) / 100.0), gpus=Count("id"))
                .order_by()
            )
            ClusterHour.objects.bulk_create(
                ClusterHour(cluster_id=cid, hour=r["hour"], gpus=r["gpus"], used_gpu_hours=r["used"] or 0.0)
                for r in rows
            )
