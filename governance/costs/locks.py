"""Transaction-scoped advisory locks that order the ledger's writers (PostgreSQL; SQLite has one writer).

Every pass takes them in one order: months (shared; a close takes its month exclusively), then jobs, then
cluster-days, each by key, so two passes wait for each other rather than deadlock, and a close waits for the
passes already pricing its month.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date

from django.db import connection

from governance.lib.months import Month

MONTH, JOB, CLUSTER_DAY = 7701, 7702, 7703
INT4 = 2**31
# Jobs and cluster-days are locked by bucket: a pass over thousands of jobs takes at most this many locks of each
# kind (PostgreSQL's lock table is shared and bounded: max_locks_per_transaction x connections). Two jobs in one
# bucket only make their passes take turns.
BUCKETS = 256


def _lock(space: int, keys: Iterable[int], *, shared: bool = False, buckets: int = INT4) -> None:
    keys = sorted({k % buckets for k in keys})
    if connection.vendor != "postgresql" or not keys:
        return
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    with connection.cursor() as cursor:
        # One statement; unnest's order is the array's, so the locks are taken in key order.
        cursor.execute(f"SELECT {function}(%s, k) FROM unnest(%s::int4[]) AS k", [space, keys])  # noqa: S608


def lock_months(months: Iterable[Month], *, shared: bool) -> None:
    _lock(MONTH, (m.year * 12 + m.month for m in months), shared=shared)


def lock_jobs(ids: Iterable[int]) -> None:
    _lock(JOB, ids, buckets=BUCKETS)


def lock_cluster_days(keys: Iterable[tuple[int, date]]) -> None:
    _lock(CLUSTER_DAY, (cluster * 100_003 + day.toordinal() for cluster, day in keys), buckets=BUCKETS)
