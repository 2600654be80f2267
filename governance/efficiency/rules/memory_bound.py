"""memory_bound: memory nearly full while SM stays low: the model, not the compute, sets the pace."""

from __future__ import annotations

from governance.efficiency.rules.base import WARNING, Draft, pct, r, rule
from governance.efficiency.summary import JobSummary, gib
from governance.efficiency.thresholds import Thresholds


@rule("memory_bound")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    total, peak = job.mem_total_mib, job.mem_peak_mib
    if not total:
        return []
    share = 100 * peak / total
    if share <= t.memory_bound_memory_percent or job.sm_mean >= t.memory_bound_sm_percent:
        return []
    return [
        Draft(
            rule="memory_bound",
            severity=WARNING,
            evidence={
                "mem_peak_gib": r(gib(peak), 1),
                "mem_total_gib": r(gib(total), 1),
                "mem_peak_percent": r(share, 1),
                "sm_mean": r(job.sm_mean, 1),
            },
            wasted_hours=job.unused_hours_by_day(),
            advice=(
                f"Memory peaks at {gib(peak):.1f} of {gib(total):.0f} GiB ({pct(share)}) while SM averages "
                f"{pct(job.sm_mean)}: use mixed precision (bf16/fp16), gradient checkpointing, or prune the model "
                "to free memory for a batch size that keeps the SMs busy."
            ),
            currency=job.currency,
        )
    ]
