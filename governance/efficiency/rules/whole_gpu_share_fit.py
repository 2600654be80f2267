"""whole_gpu_share_fit: a job holding whole GPUs whose SM and memory peaks stayed under a share of one all its life.

Peaks, not means: a share caps what the job can have at its busiest (a MIG slice's SMs and memory; a time-slice
replica's turn of the GPU and its part of the memory), so the job never needed more than the peak shows. The share
suggested is a MIG slice where the GPU offers one that holds both peaks (isolation kept), else a time-slicing
replica count (or the same fraction as a request). The saving is the bill x (1 - share), capped by the bill.
"""

from __future__ import annotations

import math

from collectors.mig import mig_smallest_fit
from governance.efficiency.rules.base import WARNING, Draft, pct, r, rule
from governance.efficiency.summary import JobSummary, gib
from governance.efficiency.thresholds import Thresholds


def _sm_peak(job: JobSummary) -> float | None:
    peaks = [h.sm_max for g in job.gpus for h in g.hours if h.sm_max is not None]
    return max(peaks) if peaks else None


@rule("whole_gpu_share_fit")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    held = job.gpu_count
    if not job.gpus or held != int(held) or held < 1 or any(g.mig_profile for g in job.gpus):
        return []  # shares are share_oversized's, MIG slices mig_fit's
    sm_peak, total = _sm_peak(job), job.mem_total_mib
    if sm_peak is None or not total or job.runtime_hours < t.whole_share_fit_min_hours:
        return []
    mem_need = gib(job.mem_peak_mib) * t.mig_fit_memory_margin
    need = max(sm_peak / 100, mem_need / gib(total))
    if need >= t.whole_share_fit_max_share or need <= 0:
        return []
    model = job.gpu_model or job.gpus[0].model
    profile = mig_smallest_fit(model, mem_need, min_fraction=sm_peak / 100)
    if profile is not None and profile.fraction >= 1:
        profile = None  # the whole GPU is no share of it
    if job.gpu_count == 1 and job.sm_mean < t.mig_fit_sm_percent and profile is not None:
        return []  # mig_fit tells this one-GPU job its slice
    replicas = math.floor(1 / need)
    share = float(profile.fraction) if profile is not None else 1 / replicas
    if share > t.whole_share_fit_max_share:
        return []
    each = "each of its GPUs" if held > 1 else "its GPU"
    if profile is not None:
        how = (
            f"run it on a {profile.name} MIG slice ({profile.compute_fraction} of the GPU's SMs, "
            f"{profile.memory_gib} GiB{' each' if held > 1 else ''})"
        )
    else:
        how = (
            f"run it on one of {replicas} time-slicing replicas of a GPU (the device plugin's sharing config, "
            f"replicas: {replicas}) or request {share:.2f} of a GPU (a fraction: Run:ai gpu-fraction, HAMi gpucores)"
        )
    return [
        Draft(
            rule="whole_gpu_share_fit",
            severity=WARNING,
            evidence={
                "gpus_held": held,
                "sm_peak": r(sm_peak, 1),
                "sm_mean": r(job.sm_mean, 1),
                "mem_peak_gib": r(gib(job.mem_peak_mib), 1),
                "mem_total_gib": r(gib(total), 1),
                "share_needed": r(need, 3),
                "suggested_share": r(share, 3),
                "profile": profile.name if profile is not None else None,
                "replicas": None if profile is not None else replicas,
            },
            wasted_hours=job.hours_by_day(lambda h: 1 - share),
            advice=(
                f"At its busiest {each} ran {pct(sm_peak)} SM and held {gib(job.mem_peak_mib):.1f} GiB of "
                f"{gib(total):.0f} GiB: it never needed more than {need:.2f} of a GPU ({t.mig_fit_memory_margin:g} x "
                f"its memory peak). Instead of whole GPUs, {how}; it would cost {share:.0%} of today's."
            ),
            currency=job.currency,
        )
    ]
