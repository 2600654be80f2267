"""Reads of usage for the API and pages: jobs as the org selectors allow, series from the hourly rollups."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import Count, F, Max, QuerySet, Sum
from django.db.models.functions import Trunc

from governance.org.models import User
from governance.org.selectors import job_visibility_filter
from governance.usage.models import GpuHour, IngestBatch, Job, JobChange, JobGpuHour

RESOLUTIONS = ("hour", "day")


def jobs_visible(*, user: User) -> QuerySet[Job]:
    return Job.objects.filter(job_visibility_filter(user=user)).select_related("cluster", "project__team")


@dataclass(frozen=True)
class UsagePoint:
    start: datetime
    gpu_hours: int  # GPU-hours with at least one sample
    samples: int
    sm_mean: float | None
    idle_share: float | None
    mem_used_max_mib: float | None
    power_mean_w: float | None


@dataclass(frozen=True)
class UtilisationPoint:
    start: datetime
    gpus: int
    gpu_hours: int
    sm_mean: float | None
    allocated_share: float | None
    idle_share: float | None


def _ratio(part: float | None, whole: float | None) -> float | None:
    return None if not whole else float(part or 0) / float(whole)


def _per_bucket(hours: QuerySet, resolution: str, **more) -> QuerySet:
    """Hourly rollup rows summed per hour or day: rows (GPU-hours), samples, idle samples, SM sum, and `more`."""
    return (
        hours.annotate(bucket=Trunc("hour", resolution, tzinfo=UTC))
        .values("bucket")
        .annotate(
            rows=Count("id"),
            n=Sum("samples"),
            sm_n=Sum("sm_samples"),
            idle=Sum("idle_samples"),
            sm=Sum("sm_sum"),
            **more,
        )
        .order_by("bucket")
    )


def job_usage_series(*, job: Job, resolution: str) -> list[UsagePoint]:
    """The job's GPUs per hour or per day, summed from JobGpuHour (never from raw samples)."""
    rows = _per_bucket(
        JobGpuHour.objects.filter(job=job),
        resolution,
        mem=Max("mem_used_max"),
        power=Sum("power_sum"),
        power_n=Sum("power_samples"),
    )
    return [
        UsagePoint(
            start=r["bucket"],
            gpu_hours=r["rows"],
            samples=r["n"],
            sm_mean=_ratio(r["sm"], r["sm_n"]),
            idle_share=_ratio(r["idle"], r["sm_n"]),
            mem_used_max_mib=r["mem"],
            power_mean_w=_ratio(r["power"], r["power_n"]),
        )
        for r in rows
    ]


def cluster_utilisation_series(
    *, cluster_id: int, resolution: str, start: datetime, end: datetime
) -> list[UtilisationPoint]:
    """Every GPU of the cluster, allocated or not, per hour or day, from GpuHour."""
    rows = _per_bucket(
        GpuHour.objects.filter(gpu__cluster_id=cluster_id, hour__gte=start, hour__lt=end),
        resolution,
        gpus=Count(F("gpu_id"), distinct=True),
        allocated=Sum("allocated_samples"),
    )
    return [
        UtilisationPoint(
            start=r["bucket"],
            gpus=r["gpus"],
            gpu_hours=r["rows"],
            sm_mean=_ratio(r["sm"], r["sm_n"]),
            allocated_share=_ratio(r["allocated"], r["n"]),
            idle_share=_ratio(r["idle"], r["sm_n"]),
        )
        for r in rows
    ]


def inbox_pending() -> QuerySet[IngestBatch]:
    """Inbox batches waiting for a worker (the partial index ingestbatch_pending_idx): dead ones wait for an admin
    instead, and are counted apart, so one of them never holds up readiness nor inflates the backlog."""
    return IngestBatch.objects.filter(processed_at__isnull=True, dead_at__isnull=True)


def inbox_dead() -> QuerySet[IngestBatch]:
    """Inbox batches set aside as dead, the latest first."""
    return IngestBatch.objects.filter(dead_at__isnull=False, processed_at__isnull=True).order_by("-dead_at", "-id")


def job_history(*, job: Job) -> QuerySet[JobChange]:
    """What changed on the job after it was on a bill, the latest first (the caller checked it may see the job)."""
    return JobChange.objects.filter(job=job).order_by("-at", "-id")
