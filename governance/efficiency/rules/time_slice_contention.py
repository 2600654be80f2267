"""time_slice_contention: a latency-sensitive job time-sliced on one GPU with other jobs while the GPU is saturated.

Time-slicing gives no isolation: the jobs on a GPU take turns on all its SMs and share its memory, so a latency-
sensitive job waits behind its neighbours' kernels whenever they keep the GPU busy. The fix is a GPU of its own or
a MIG slice (its own SMs, memory and bandwidth). It is a performance finding: the job would pay the same or more,
so it claims no wasted hours and saves nothing.
"""

from __future__ import annotations

from collectors.mig import mig_smallest_fit
from governance.efficiency.rules.base import WARNING, Draft, pct, r, rule
from governance.efficiency.summary import JobSummary, gib
from governance.efficiency.thresholds import Thresholds, latency_sensitive


@rule("time_slice_contention")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    label = latency_sensitive(job.labels, t)
    share = job.gpus_requested
    if label is None or share is None or not 0 < share < 1:
        return []
    hours_on_gpus = (h for g in job.gpus if not g.mig_profile for h in g.hours)
    contended = [h for h in hours_on_gpus if h.co_tenants and h.gpu_sm_mean is not None]
    samples = sum(h.samples for h in contended)
    hours = samples * job.hours_per_sample
    if not contended or hours < t.contention_min_hours:
        return []
    gpu_sm = sum(h.samples * (h.gpu_sm_mean or 0.0) for h in contended) / samples
    if gpu_sm < t.contention_sm_percent:
        return []
    neighbours = max(h.co_tenants for h in contended)
    model = job.gpu_model or next((g.model for g in job.gpus if g.model), "")
    need = gib(job.mem_peak_mib) * t.mig_fit_memory_margin if job.mem_known else None
    profile = mig_smallest_fit(model, need) if need is not None else None
    if profile is not None and profile.fraction < 1:
        instead = (
            f"a {profile.name} MIG slice (its peak {gib(job.mem_peak_mib):.1f} GiB x {t.mig_fit_memory_margin:g} "
            f"fits its {profile.memory_gib} GiB) or a GPU of its own"
        )
    else:
        instead = "a GPU of its own (no MIG slice of this GPU is known to hold its memory)"
    return [
        Draft(
            rule="time_slice_contention",
            severity=WARNING,
            evidence={
                "label": label,
                "gpu_share": r(share, 6),
                "contended_hours": r(hours, 1),
                "co_tenants_max": neighbours,
                "gpu_sm_mean_contended": r(gpu_sm, 1),
                "profile": profile.name if profile is not None and profile.fraction < 1 else None,
            },
            wasted_hours={},
            advice=(
                f"This latency-sensitive job ({label}) time-sliced its GPU with up to {neighbours} other "
                f"job{'s' if neighbours > 1 else ''} for {hours:.1f} h while the GPU ran at {pct(gpu_sm)} SM: "
                f"time-slicing gives no isolation (the jobs take turns on every SM and share the memory), so its "
                f"requests queue behind its neighbours' kernels. Give it {instead}. A performance finding: it saves "
                f"no money."
            ),
            currency=job.currency,
        )
    ]
