"""inference_oversized: a long-running inference job (label kind=inference) with low SM and high memory."""

from __future__ import annotations

from collectors.mig import mig_smallest_fit
from governance.efficiency.rules.base import WARNING, Draft, pct, r, rule
from governance.efficiency.summary import JobSummary, gib
from governance.efficiency.thresholds import Thresholds

INFERENCE = "inference"
# Quantising 16-bit weights to 8 bits roughly halves the memory a served model holds.
QUANTISED_SHARE = 0.5


@rule("inference_oversized")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    if job.labels.get("kind") != INFERENCE or job.runtime_hours < t.inference_min_hours:
        return []
    total, peak = job.mem_total_mib, job.mem_peak_mib
    if not total or job.sm_mean >= t.inference_sm_percent:
        return []
    share = 100 * peak / total
    if share < t.inference_memory_percent:
        return []
    after = gib(peak) * QUANTISED_SHARE * t.mig_fit_memory_margin
    profile = mig_smallest_fit(job.gpu_model or (job.gpus[0].model if job.gpus else ""), after)
    if profile is not None and profile.fraction < 1:
        slice_text = f", then serve from a {profile.name} MIG slice ({profile.compute_fraction} of the GPU's cost)"
        by_day = job.hours_by_day(lambda h: 1 - float(profile.fraction))
    else:
        slice_text = ", then pack more replicas per GPU"
        by_day = job.unused_hours_by_day()
    return [
        Draft(
            rule="inference_oversized",
            severity=WARNING,
            evidence={
                "runtime_hours": r(job.runtime_hours, 1),
                "sm_mean": r(job.sm_mean, 1),
                "mem_peak_gib": r(gib(peak), 1),
                "mem_peak_percent": r(share, 1),
                "profile_after_quantisation": profile.name if profile else None,
            },
            wasted_hours=by_day,
            advice=(
                f"This inference service has run {job.runtime_hours:.0f} h at {pct(job.sm_mean)} SM while holding "
                f"{gib(peak):.1f} GiB ({pct(share)} of the GPU): prune or quantise the model (int8/fp8 weights "
                f"about halve its memory){slice_text}."
            ),
            currency=job.currency,
        )
    ]
