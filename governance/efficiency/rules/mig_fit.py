"""mig_fit: a one-GPU job with low SM whose peak memory (with margin) fits a MIG slice of its GPU."""

from __future__ import annotations

from collectors.mig import mig_smallest_fit
from governance.efficiency.rules.base import WARNING, Draft, pct, r, rule
from governance.efficiency.summary import JobSummary, gib
from governance.efficiency.thresholds import Thresholds


@rule("mig_fit")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    if job.gpu_count != 1 or len(job.gpus) != 1 or job.gpus[0].mig_profile or not job.mem_known:
        return []
    if job.gpus_requested is not None and job.gpus_requested < 1:
        return []  # a share of one GPU, not a whole one to slice (share_oversized sizes the share)
    gpu = job.gpus[0]
    if job.sm_mean >= t.mig_fit_sm_percent:
        return []
    peak = gib(job.mem_peak_mib)
    need = peak * t.mig_fit_memory_margin
    profile = mig_smallest_fit(gpu.model or job.gpu_model, need)
    if profile is None or profile.fraction >= 1:
        return []
    return [
        Draft(
            rule="mig_fit",
            severity=WARNING,
            evidence={
                "mem_peak_gib": r(peak, 1),
                "mem_total_gib": r(gib(gpu.memory_total_mib), 1) if gpu.memory_total_mib else None,
                "mem_needed_gib": r(need, 1),
                "sm_mean": r(job.sm_mean, 1),
                "profile": profile.name,
                "profile_memory_gib": profile.memory_gib,
                "profile_share": profile.compute_fraction,
            },
            wasted_hours=job.hours_by_day(lambda h: 1 - float(profile.fraction)),
            advice=(
                f"Peak {peak:.1f} GiB of {gib(gpu.memory_total_mib or 0):.0f} GiB and {pct(job.sm_mean)} SM; "
                f"a {profile.name} slice fits with margin ({t.mig_fit_memory_margin:g} x peak = {need:.1f} GiB) "
                f"and would cost {profile.compute_fraction} of today's."
            ),
            currency=job.currency,
        )
    ]
