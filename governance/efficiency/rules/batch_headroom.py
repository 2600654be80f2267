"""batch_headroom: SM well below the line and memory under half the GPU: a larger batch would use both."""

from __future__ import annotations

from math import floor

from governance.efficiency.rules.base import INFO, Draft, pct, r, rule
from governance.efficiency.summary import JobSummary, gib
from governance.efficiency.thresholds import Thresholds


@rule("batch_headroom")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    total, peak = job.mem_total_mib, job.mem_peak_mib
    if not total or not peak or job.sm_mean < t.idle_sm_percent:
        return []
    share = 100 * peak / total
    if job.sm_mean >= t.batch_headroom_sm_percent or share >= t.batch_headroom_memory_percent:
        return []
    factor = floor(10 * t.batch_headroom_target_memory_percent / share) / 10
    return [
        Draft(
            rule="batch_headroom",
            severity=INFO,
            evidence={
                "sm_mean": r(job.sm_mean, 1),
                "mem_peak_gib": r(gib(peak), 1),
                "mem_total_gib": r(gib(total), 1),
                "mem_peak_percent": r(share, 1),
                "batch_factor": factor,
            },
            wasted_hours=job.unused_hours_by_day(),
            advice=(
                f"SM averages {pct(job.sm_mean)} and memory peaks at {gib(peak):.1f} of {gib(total):.0f} GiB "
                f"({pct(share)}): raise the batch size up to {factor:g}x, which keeps memory under "
                f"{pct(t.batch_headroom_target_memory_percent)} (scale the learning rate with it)."
            ),
            currency=job.currency,
        )
    ]
