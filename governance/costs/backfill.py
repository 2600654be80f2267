"""Marks that re-price the open days whose usage rows predate the ledger's gpu_share (costs migration 0017).

A job on a share of one GPU (0 < gpus < 1) priced before the ledger kept the share has usage rows with no
gpu_share, so its team month says nothing of its spend on shared GPUs and FOCUS leaves x_GpuShare blank. The share
is the job's own declared gpus, so re-pricing its days writes it (and the day's summary with it). Only open days
are marked: a closed month's statement lines are frozen and never move. Takes the model classes, so the data
migration runs it on its historical models and tests on the real ones.
"""

from __future__ import annotations

from typing import Any

from governance.lib.months import Month


def gpu_share_marks(*, charge: Any, month_close: Any, pricing_mark: Any) -> int:
    """Write a mark per (job, cluster, day) of an open day whose usage rows of a job on a share carry no share,
    and one per such cluster-day; returns how many were written (the worker re-prices them)."""
    latest = month_close.objects.order_by("-month").values_list("month", flat=True).first()
    rows = charge.objects.filter(kind="usage", gpu_share__isnull=True, job__gpus__gt=0, job__gpus__lt=1)
    if latest is not None:
        rows = rows.filter(day__gte=Month(latest.year, latest.month).end.date())
    pairs = set(rows.values_list("job_id", "cluster_id", "day").distinct())
    cluster_days = {(cluster, day) for _, cluster, day in pairs}
    marks = [pricing_mark(job_id=j, cluster_id=c, day=d) for j, c, d in sorted(pairs)]
    marks += [pricing_mark(job_id=None, cluster_id=c, day=d) for c, d in sorted(cluster_days)]
    pricing_mark.objects.bulk_create(marks, batch_size=5000)
    return len(marks)
