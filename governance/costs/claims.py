"""What a pricing pass claims of the marks (usage.PricingMark): the oldest first, whole cluster-days.

A pass pays for each cluster-day it touches (its capacity and summaries re-summed, its contention checked over
every job held on it), whatever share of the day's marks it holds. A claim that stopped inside a cluster-day
would leave the rest of it to the next pass, which would pay for the day again: a claim takes the rest of the
last cluster-day it reached, so a backlog of a large fleet is priced a cluster-day once, and a pass grows by one
cluster-day's marks at most.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.db import connection

from governance.usage.models import PricingMark

CLAIM = """
DELETE FROM usage_pricingmark WHERE id IN (
    SELECT id FROM usage_pricingmark ORDER BY day, cluster_id, id LIMIT %s FOR UPDATE SKIP LOCKED
) RETURNING job_id, cluster_id, day
"""
CLAIM_REST = """
DELETE FROM usage_pricingmark WHERE id IN (
    SELECT id FROM usage_pricingmark WHERE day = %s AND cluster_id = %s FOR UPDATE SKIP LOCKED
) RETURNING job_id, cluster_id, day
"""

Mark = tuple[int | None, int, date]


@dataclass
class Claim:
    marks: list[Mark]
    more: bool  # the claim reached its limit: marks may be left


def marks_claim(limit: int) -> Claim:
    """Claim (delete and return) the `limit` oldest marks others do not hold, then the rest of the last cluster-day
    they reached. Runs in the caller's transaction."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(CLAIM, [limit])
            marks = cursor.fetchall()
            if len(marks) < limit:
                return Claim(marks, False)
            _, cluster_id, day = max(marks, key=lambda m: (m[2], m[1]))
            cursor.execute(CLAIM_REST, [day, cluster_id])
            return Claim(marks + cursor.fetchall(), True)
    ordered = PricingMark.objects.order_by("day", "cluster_id", "id").values_list("id", "job_id", "cluster_id", "day")
    rows = list(ordered[:limit])
    if len(rows) == limit:
        last, _, cluster_id, day = rows[-1]
        rows += list(ordered.filter(day=day, cluster_id=cluster_id, id__gt=last))  # the rest of its cluster-day
    PricingMark.objects.filter(id__in=[r[0] for r in rows]).delete()
    return Claim([r[1:] for r in rows], len(rows) >= limit)
