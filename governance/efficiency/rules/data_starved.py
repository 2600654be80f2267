"""data_starved: the GPU waits on input: low SM with high I/O wait or a saturated host CPU, or SM oscillating.

Oscillation is the sample-weighted mean, over the hours in which the GPU worked, of the within-hour
coefficient of variation of SM (spread / mean, from the rollup's sum of squares): a steady job stays near 0,
a GPU that alternates between waiting and computing approaches 1.
"""

from __future__ import annotations

from governance.efficiency.rules.base import WARNING, Draft, pct, r, rule
from governance.efficiency.summary import JobSummary
from governance.efficiency.thresholds import Thresholds


def _mean(pairs: list[tuple[float, int]]) -> float | None:
    n = sum(count for _, count in pairs)
    return sum(total for total, _ in pairs) / n if n else None


def oscillation(job: JobSummary, idle_sm: float) -> float | None:
    worked = [h for g in job.gpus for h in g.hours if h.samples >= 2 and h.sm_mean >= max(idle_sm, 1.0)]
    n = sum(h.samples for h in worked)
    return sum(h.sm_std / h.sm_mean * h.samples for h in worked) / n if n else None


@rule("data_starved")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    hours = [h for g in job.gpus for h in g.hours]
    io_wait = _mean([(h.io_wait_sum, h.io_wait_samples) for h in hours])
    host_cpu = _mean([(h.host_cpu_sum, h.host_cpu_samples) for h in hours])
    cv = oscillation(job, t.idle_sm_percent)
    low = t.idle_sm_percent <= job.sm_mean < t.data_starved_sm_percent
    reasons = []
    if low and io_wait is not None and io_wait >= t.data_starved_io_wait_percent:
        reasons.append(f"I/O wait averages {pct(io_wait)}")
    if low and host_cpu is not None and host_cpu >= t.data_starved_host_cpu_percent:
        reasons.append(f"the host CPUs run at {pct(host_cpu)}")
    if cv is not None and cv >= t.data_starved_oscillation_cv:
        reasons.append(f"SM swings between waiting and computing (spread {cv:.2f} x its mean within the hour)")
    if not reasons:
        return []
    return [
        Draft(
            rule="data_starved",
            severity=WARNING,
            evidence={
                "sm_mean": r(job.sm_mean, 1),
                "io_wait_mean": r(io_wait, 1) if io_wait is not None else None,
                "host_cpu_mean": r(host_cpu, 1) if host_cpu is not None else None,
                "sm_oscillation_cv": r(cv) if cv is not None else None,
            },
            wasted_hours=job.unused_hours_by_day(),
            advice=(
                f"The GPU waits for data: SM averages {pct(job.sm_mean)} and {'; '.join(reasons)}. "
                "Add data-loader workers and prefetching (num_workers, prefetch_factor, pin_memory), cache the "
                "dataset on local disk, and read columnar or sharded formats (Parquet, WebDataset)."
            ),
            currency=job.currency,
        )
    ]
