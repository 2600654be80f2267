"""Pricing never stops for one bad value: a job-day the pass cannot price is recorded with its error and left
out, the rest of its cluster-day and of the pass is priced, and the periodic pass retries it (a success clears it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import date, datetime

from django.db.models import F

from governance.costs.marks import REPRICE_TASK
from governance.costs.models import PricingFailure
from governance.lib.enqueue import enqueue_on_commit
from governance.usage.models import PricingMark

logger = logging.getLogger(__name__)
Failed = dict[tuple[int, int, date], str]


def job_day_failed(failed: Failed, job: int, cluster_id: int, day: date, exc: Exception) -> None:
    """Note a job-day the pass could not price; the pass goes on with the rest."""
    logger.exception("pricing job %s on %s failed; the rest of the pass goes on", job, day, exc_info=exc)
    failed[(job, cluster_id, day)] = f"{type(exc).__name__}: {exc}"


def pricing_failures_record(*, failed: Failed, priced: Iterable[tuple[int, date]], now: datetime) -> None:
    """Keep each failed (job, cluster, day) with its error and count the attempt; forget the job-days priced now."""
    if PricingFailure.objects.exists():
        done = set(priced)
        jobs = {job for job, _ in done}
        stale = [
            pk
            for pk, job, day in PricingFailure.objects.filter(job_id__in=jobs).values_list("pk", "job_id", "day")
            if (job, day) in done
        ]
        if stale:
            PricingFailure.objects.filter(pk__in=stale).delete()
    for (job, cluster, day), error in sorted(failed.items()):
        again = PricingFailure.objects.filter(job_id=job, day=day)
        if not again.update(error=error, last_seen_at=now, attempts=F("attempts") + 1):
            PricingFailure.objects.create(
                job_id=job, cluster_id=cluster, day=day, error=error, first_seen_at=now, last_seen_at=now
            )


def pricing_failures_mark(*, pks: Iterable[int] | None = None) -> int:
    """Mark the failed job-days (these, or all) for re-pricing after commit: the periodic pass retries every one,
    an admin retries some after a fix. Returns how many were marked."""
    failures = PricingFailure.objects.all() if pks is None else PricingFailure.objects.filter(pk__in=list(pks))
    marks = [
        PricingMark(job_id=job, cluster_id=cluster, day=day)
        for job, cluster, day in failures.values_list("job_id", "cluster_id", "day")
    ]
    PricingMark.objects.bulk_create(marks)
    if marks:
        enqueue_on_commit(REPRICE_TASK)
    return len(marks)
