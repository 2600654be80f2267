"""Marks for the pricing worker: the days of the jobs a change touched (usage.PricingMark).

Ingest marks the days of its samples in SQL (writer.MARK_DAYS); a job whose record or project changed has the days
of its life marked, since its count, times or team price each of them: from its start to its end, or for a job
still open, to now. A job seen for the first time has not been billed yet: an open one is marked to its last
sample only (the days after it are marked as their samples arrive, and today by the running jobs' pass), unless no
sample has ever shown it (a count its scheduler declares on a cluster without collectors: billed to now). A job
whose end arrives is marked to its end; the pricing pass re-prices any day billed past it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timedelta

from django.db import connection
from django.db.models import Max
from django.utils import timezone

from governance.usage.models import JobGpuHour, PricingMark

# A job older than this is not re-priced in full by a change of its record (its late days are, by their samples).
MAX_MARKED_DAYS = 400
HOUR = timedelta(hours=1)


def _last_samples(pks: list[int]) -> dict[int, datetime]:
    rows = JobGpuHour.objects.filter(job_id__in=pks).values("job_id").annotate(last=Max("hour")).order_by()
    return {r["job_id"]: r["last"] for r in rows}


def job_last_marked(
    *, start: datetime, end: datetime | None, new: bool, last_sample: datetime | None, sampled: bool, now: datetime
) -> date:
    """The last day a change of a job's record re-prices (see the module). `sampled`: the batch being written holds
    samples of the job (it marks their days itself)."""
    if end is not None:
        last = end
    elif not new:
        last = now
    elif last_sample is not None:
        last = last_sample + HOUR - timedelta(microseconds=1)
    elif sampled:
        last = start
    else:
        last = now
    return max(min(last, now), start).date()


def job_days_mark(
    jobs: Iterable[tuple[int, int, datetime | None, datetime | None]],
    now: datetime | None = None,
    *,
    new: Iterable[int] = (),
    sampled: Iterable[int] = (),
) -> int:
    """Mark the days of each job's life: (job id, cluster id, start, end). `new`: jobs seen for the first time;
    `sampled`: jobs whose samples are in the batch being written (their rollups are not folded yet)."""
    now = now or timezone.now()
    jobs = [j for j in jobs if j[2] is not None]
    new, sampled = set(new), set(sampled)
    seen = _last_samples([pk for pk, _, _, end in jobs if end is None and pk in new])
    spans = []
    for pk, cluster_id, start, end in jobs:
        assert start is not None
        last = job_last_marked(start=start, end=end, new=pk in new, last_sample=seen.get(pk), sampled=pk in sampled,
                               now=now)  # fmt: skip
        first = max(start.date(), last - timedelta(days=MAX_MARKED_DAYS))
        if first <= last:
            spans.append((pk, cluster_id, first, last))
    return _spans_mark(spans)


# A job's days as one INSERT ... SELECT (PostgreSQL): a job marked from its start to now names every day of its
# life, and a model instance per day cost more than the rest of the batch's job records.
MARK_SPANS = """
INSERT INTO usage_pricingmark (job_id, cluster_id, day)
SELECT s.job_id, s.cluster_id, d::date
FROM unnest(%s::int8[], %s::int8[], %s::date[], %s::date[]) AS s (job_id, cluster_id, first, last),
    generate_series(s.first::timestamp, s.last::timestamp, interval '1 day') AS d
"""


def _spans_mark(spans: list[tuple[int, int, date, date]]) -> int:
    """Mark each day from `first` to `last` (both included) of each (job id, cluster id, first, last)."""
    if not spans:
        return 0
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(MARK_SPANS, [list(column) for column in zip(*spans, strict=True)])
            return cursor.rowcount
    marks = [
        PricingMark(job_id=pk, cluster_id=cluster_id, day=first + timedelta(days=n))
        for pk, cluster_id, first, last in spans
        for n in range((last - first).days + 1)
    ]
    PricingMark.objects.bulk_create(marks, batch_size=5000)
    return len(marks)
