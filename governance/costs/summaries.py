"""Keeps the ledger's summaries equal to the ledger: every pass that writes ledger rows re-sums the cluster-days it
wrote, in its own transaction, so a page never reads a summary that disagrees with the rows it sums. A
cluster-day of the per-day summary (`LedgerDay`) is summed whole; so is the month of every job with usage rows on
those days, or whose rows spanned them (`JobMonth`, governance/costs/job_months.py): whichever writer touched
them, the sums come from the rows."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date

from django.db import connection
from django.db.models import Count, Q, Sum, Value
from django.db.models.functions import Coalesce

from governance.costs.job_months import job_months_rebuild, job_months_refresh
from governance.costs.ledger import AMOUNTS, ZERO
from governance.costs.models import Charge, LedgerDay
from governance.lib.cluster_days import CLUSTER_DAYS, cluster_days_run, days_by_cluster

KEY = (
    "month", "day", "cluster_id", "cluster_name", "team_id", "team_name", "project_id", "project_name", "gpu_model",
    "mig_profile", "kind", "corrected_kind", "billed", "currency",
)  # fmt: skip
# Of the rows on a share of one GPU: how much of a team's month was spent on shared GPUs.
SHARED = {"shared_gpu_hours": "gpu_hours", "shared_cost": "cost"}
COLUMNS = ", ".join((*KEY, "rows", *AMOUNTS, *SHARED))
SUMS = ", ".join(
    [f"sum(c.{a})" for a in AMOUNTS]
    + [f"coalesce(sum(c.{a}) FILTER (WHERE c.gpu_share IS NOT NULL), 0)" for a in SHARED.values()]
)
GROUP = ", ".join(f"c.{k}" for k in KEY)
KEYS = CLUSTER_DAYS
DELETE = f"DELETE FROM costs_ledgerday s USING {KEYS} WHERE s.cluster_id = k.cluster_id AND s.day = k.day"  # noqa: S608
INSERT = f"""
INSERT INTO costs_ledgerday ({COLUMNS})
SELECT {GROUP}, count(*), {SUMS}
FROM costs_charge c JOIN {KEYS} ON c.cluster_id = k.cluster_id AND c.day = k.day
GROUP BY {GROUP}
"""  # noqa: S608
REBUILD = f"""
INSERT INTO costs_ledgerday ({COLUMNS})
SELECT {GROUP}, count(*), {SUMS} FROM costs_charge c GROUP BY {GROUP}
"""  # noqa: S608


def ledger_days_refresh(keys: Iterable[tuple[int, date]]) -> None:
    """Re-sum these (cluster id, day) pairs from the ledger. Runs in the caller's transaction, after its writes."""
    keys = sorted(set(keys))
    if not keys:
        return
    job_months_refresh(keys)
    if connection.vendor == "postgresql":
        cluster_days_run([DELETE, INSERT], keys)
        return
    where = Q()
    for cid, days in days_by_cluster(keys).items():
        where |= Q(cluster_id=cid, day__in=days)
    LedgerDay.objects.filter(where).delete()
    _insert(Charge.objects.filter(where))


def ledger_days_rebuild() -> None:
    """Sum the whole ledger again (a ledger written by hand, as some tests do; the migration that adds the table)."""
    job_months_rebuild()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM costs_ledgerday")
            cursor.execute(REBUILD)
        return
    LedgerDay.objects.all().delete()
    _insert(Charge.objects.all())


def _insert(rows) -> None:
    on_share = Q(gpu_share__isnull=False)
    shared = {name: Coalesce(Sum(a, filter=on_share), Value(ZERO)) for name, a in SHARED.items()}
    groups = rows.values(*KEY).annotate(n=Count("id"), **{f"s_{a}": Sum(a) for a in AMOUNTS}, **shared).order_by()
    LedgerDay.objects.bulk_create(
        [LedgerDay(**{k: g[k] for k in KEY}, rows=g["n"], **{a: g[f"s_{a}"] for a in AMOUNTS},
                   **{name: g[name] for name in SHARED}) for g in groups],
        batch_size=2000,
    )  # fmt: skip
