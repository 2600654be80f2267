"""The cluster of each job a pricing pass holds, in one statement: a pass of a large fleet holds tens of thousands
of jobs, and a statement with a placeholder per job costs more to build than to run."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection

from governance.usage.models import Job

CLUSTERS = "SELECT id, cluster_id FROM usage_job WHERE id = ANY(%s::int8[])"


def job_clusters_of(ids: Iterable[int]) -> dict[int, int]:
    """Job id -> cluster id, for the jobs among `ids` that exist."""
    ids = list(ids)
    if not ids:
        return {}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(CLUSTERS, [ids])
            return dict(cursor.fetchall())
    return dict(Job.objects.filter(pk__in=ids).order_by().values_list("pk", "cluster_id"))
