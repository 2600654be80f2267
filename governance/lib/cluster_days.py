"""Rollups re-summed by (cluster id, day): the pairs a pricing pass touched, handed to SQL as two arrays."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import date

from django.db import connection

# The pairs as a relation `k(cluster_id, day)`; its two parameters are those `cluster_days_run` passes.
CLUSTER_DAYS = "unnest(%s::int8[], %s::date[]) AS k(cluster_id, day)"


def cluster_days_run(statements: Iterable[str], keys: list[tuple[int, date]]) -> None:
    """Run each statement (PostgreSQL) with the pairs `keys` as the parameters of its CLUSTER_DAYS."""
    params: list = [[c for c, _ in keys], [d for _, d in keys]]
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql, params)


def days_by_cluster(keys: Iterable[tuple[int, date]]) -> dict[int, set[date]]:
    by_cluster: dict[int, set[date]] = defaultdict(set)
    for cid, day in keys:
        by_cluster[cid].add(day)
    return by_cluster
