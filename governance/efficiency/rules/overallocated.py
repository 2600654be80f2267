"""overallocated: a multi-GPU job leaves some GPUs idle while others work; savings are the idle GPUs' cost."""

from __future__ import annotations

from governance.efficiency.rules.base import WARNING, Draft, pct, r, rule
from governance.efficiency.summary import JobSummary
from governance.efficiency.thresholds import Thresholds


@rule("overallocated")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    if len(job.gpus) < 2:
        return []
    idle = [g for g in job.gpus if g.sm_known and g.sm_mean < t.idle_sm_percent]
    busy = [g for g in job.gpus if g.sm_mean >= t.overallocated_busy_sm_percent]
    if not idle or not busy:
        return []
    wasted = len(idle) * job.runtime_hours
    keep = job.gpu_count - len(idle)
    names = ", ".join(f"{g.node}:{g.index}" for g in idle)
    busy_mean = sum(g.sm_mean for g in busy) / len(busy)
    return [
        Draft(
            rule="overallocated",
            severity=WARNING,
            evidence={
                "gpus_held": job.gpu_count,
                "gpus_idle": len(idle),
                "idle_gpus": names,
                "busy_sm_mean": r(busy_mean, 1),
                "idle_gpu_hours": r(wasted),
            },
            wasted_hours=job.hours_by_day(gpus=idle),
            advice=(
                f"{len(idle)} of {job.gpu_count} GPUs ({names}) stayed under {pct(t.idle_sm_percent)} SM while the "
                f"others worked at {pct(busy_mean)}: request {keep} GPU{'s' if keep != 1 else ''} instead of "
                f"{job.gpu_count}."
            ),
            currency=job.currency,
        )
    ]
