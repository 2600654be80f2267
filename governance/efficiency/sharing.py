"""Who else was on a job's shared GPU: for each hour a job on a share of one (time-sliced) GPU held it, the other
jobs seen on that GPU and the GPU's own mean SM over every tenant's samples. Two queries whatever the jobs' number.

A MIG slice is a GPU of its own here (its own Gpu row), so jobs on slices of one board never count as tenants of
one GPU: only time-slicing, MPS and fractional sharing put several jobs' samples on one Gpu row in one hour.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import datetime

from governance.efficiency.summary import GpuSummary, JobSummary
from governance.usage.models import GpuHour, JobGpuHour


def _shared(summary: JobSummary) -> bool:
    share = summary.gpus_requested
    return share is not None and 0 < share < 1 and any(not g.mig_profile for g in summary.gpus)


def sharing_add(summaries: list[JobSummary]) -> list[JobSummary]:
    """The summaries, those of jobs on a share of one GPU with each hour's co-tenants and GPU SM filled in."""
    shared = [s for s in summaries if _shared(s)]
    gpu_ids = {g.gpu_id for s in shared for g in s.gpus if not g.mig_profile}
    hours = [h.hour for s in shared for g in s.gpus for h in g.hours]
    if not gpu_ids or not hours:
        return summaries
    span = {"gpu_id__in": gpu_ids, "hour__gte": min(hours), "hour__lte": max(hours)}
    tenants: dict[tuple[int, datetime], set[int]] = defaultdict(set)
    for gpu_id, hour, job_id in JobGpuHour.objects.filter(**span).values_list("gpu_id", "hour", "job_id"):
        tenants[(gpu_id, hour)].add(job_id)
    gpu_sm = {
        (gpu_id, hour): sm / n
        for gpu_id, hour, sm, n in GpuHour.objects.filter(**span).values_list("gpu_id", "hour", "sm_sum", "sm_samples")
        if n
    }

    def filled(s: JobSummary) -> JobSummary:
        def gpu(g: GpuSummary) -> GpuSummary:
            if g.mig_profile:
                return g
            return replace(
                g,
                hours=tuple(
                    replace(h, co_tenants=len(tenants[(g.gpu_id, h.hour)] - {s.job_id}),
                            gpu_sm_mean=gpu_sm.get((g.gpu_id, h.hour)))
                    for h in g.hours
                ),
            )  # fmt: skip

        return replace(s, gpus=tuple(gpu(g) for g in s.gpus))

    return [filled(s) if _shared(s) else s for s in summaries]
