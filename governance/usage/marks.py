"""Marks for the pricing worker: the days of the jobs a change touched (usage.PricingMark).

Ingest marks the days of its samples in SQL (writer.MARK_DAYS); a job whose record or project changed has every
day of its life marked, since its count, times or team price each of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.utils import timezone

from governance.usage.models import PricingMark

# A job older than this is not re-priced in full by a change of its record (its late days are, by their samples).
MAX_MARKED_DAYS = 400


def job_days_mark(
    jobs: Iterable[tuple[int, int, datetime | None, datetime | None]], now: datetime | None = None
) -> int:
    """Mark every day from each job's start to its end (or now): (job id, cluster id, start, end)."""
    now = now or timezone.now()
    marks = []
    for pk, cluster_id, start, end in jobs:
        if start is None:
            continue
        last = min(end or now, now).date()
        first = max(start.date(), last - timedelta(days=MAX_MARKED_DAYS))
        day = first
        while day <= last:
            marks.append(PricingMark(job_id=pk, cluster_id=cluster_id, day=day))
            day += timedelta(days=1)
    PricingMark.objects.bulk_create(marks, batch_size=5000)
    return len(marks)
