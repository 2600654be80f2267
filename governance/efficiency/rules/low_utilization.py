"""low_utilization: mean SM under the red threshold (critical) or the note threshold (info).

The hours it calls wasted are the unused share (1 - SM) of each held hour; the rules before it in the waste
precedence (governance/efficiency/waste.py) take those they explain first. A job that never used its GPUs is
idle_gpu's: profiling advice does not help code that does not run on the GPU.
"""

from __future__ import annotations

from governance.efficiency.rules.base import CRITICAL, INFO, Draft, pct, r, rule
from governance.efficiency.summary import JobSummary
from governance.efficiency.thresholds import Thresholds


@rule("low_utilization")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    mean = job.sm_mean
    if mean >= t.low_util_note_percent or mean < t.idle_sm_percent:
        return []
    red = mean < t.low_util_red_percent
    contrast = f" (cluster mean {pct(job.cluster_sm_mean)})" if job.cluster_sm_mean is not None else ""
    tensor = job.profile_mean("tensor")
    # Tensor cores idle while the SMs do work: the math runs in fp32 on the CUDA cores.
    precision = (
        f" Tensor cores are active {pct(tensor)} of the time: mixed precision (bf16/fp16, TF32 matmuls) puts them "
        "to work."
        if tensor is not None and tensor < mean / 2
        else ""
    )
    return [
        Draft(
            rule="low_utilization",
            severity=CRITICAL if red else INFO,
            evidence={
                "sm_mean": r(mean, 1),
                "threshold": t.low_util_red_percent if red else t.low_util_note_percent,
                "cluster_sm_mean": r(job.cluster_sm_mean, 1) if job.cluster_sm_mean is not None else None,
                "gpu_hours": r(job.allocated_gpu_hours),
                "tensor_active_mean": r(tensor, 1) if tensor is not None else None,
            },
            wasted_hours=job.unused_hours_by_day(),
            advice=(
                f"Mean SM utilisation is {pct(mean)}{contrast}, under the "
                f"{pct(t.low_util_red_percent if red else t.low_util_note_percent)} line: profile a step "
                "(torch.profiler, Nsight Systems) to see where time goes, check the data pipeline keeps up, "
                f"and try a larger batch size.{precision}"
            ),
            currency=job.currency,
        )
    ]
