"""Whether a policy's condition holds for a job right now, from the job's hourly rollups: pure, data in and out.

The window is the last `idle_hours` hours, widened to the start of its first hour (rollups are hourly): a GPU is
idle when its mean SM over the window is under the idle threshold. The widening errs towards sparing a job: an hour
that saw work before the window began counts as work.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from governance.efficiency.idle_patterns import NIGHT_HOURS, interactive

IDLE_GPU, IDLE_AFTER_WORK, INTERACTIVE_NIGHT, OVERALLOCATED = (
    "idle_gpu", "idle_after_work", "interactive_night", "overallocated",
)  # fmt: skip


@dataclass(frozen=True)
class HourRow:
    """One GPU's hour of the job, as the rollup has it."""

    gpu: str
    hour: datetime
    samples: int
    sm_samples: int
    sm_sum: float


@dataclass(frozen=True)
class Verdict:
    holds: bool
    why: str
    evidence: dict = field(default_factory=dict)


def window_start(now: datetime, idle_hours: float) -> datetime:
    start = now - timedelta(hours=idle_hours)
    return start.replace(minute=0, second=0, microsecond=0)


def _means(rows: Sequence[HourRow]) -> dict[str, float | None]:
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in rows:
        sums[r.gpu][0] += r.sm_sum
        sums[r.gpu][1] += r.sm_samples
    return {gpu: (s / n if n else None) for gpu, (s, n) in sums.items()}


def condition_check(
    *, condition: str, rows: Sequence[HourRow], now: datetime, idle_hours: float, idle_sm: float,
    started_at: datetime | None, labels: Mapping[str, str],
) -> Verdict:  # fmt: skip
    """Does `condition` hold at `now`? `rows` are the job's hours, any age (older ones tell work before the window)."""
    start = window_start(now, idle_hours)
    recent = [r for r in rows if start <= r.hour < now]
    means = _means(recent)
    idle = sorted(g for g, m in means.items() if m is not None and m < idle_sm)
    busy = sorted(g for g, m in means.items() if m is not None and m >= idle_sm)
    evidence = {
        "window_start": start.isoformat(),
        "window_end": now.isoformat(),
        "idle_sm_percent": idle_sm,
        "gpus": [{"gpu": g, "sm_mean": round(m, 2) if m is not None else None} for g, m in sorted(means.items())],
        "idle_gpus": len(idle),
        "busy_gpus": len(busy),
    }
    if started_at is None or started_at > now - timedelta(hours=idle_hours):
        return Verdict(False, f"the job has not run {idle_hours:g} h yet", evidence)
    if not recent or min(r.hour for r in recent) > start:
        return Verdict(False, "the rollups do not cover the window", evidence)
    if condition == OVERALLOCATED:
        if idle and busy:
            return Verdict(True, f"{len(idle)} of {len(means)} GPUs idle while the others work", evidence)
        return Verdict(False, "no GPU idle beside working ones", evidence)
    if busy or not idle:
        return Verdict(False, f"{len(busy)} GPU(s) worked in the window", evidence)
    if condition == IDLE_AFTER_WORK:
        before = _means([r for r in rows if r.hour < start])
        if not any(m is not None and m >= idle_sm for m in before.values()):
            return Verdict(False, "idle, but never worked before the window", evidence)
    if condition == INTERACTIVE_NIGHT:
        if not interactive(labels):
            return Verdict(False, "not an interactive session", evidence)
        if now.hour not in NIGHT_HOURS:
            return Verdict(False, "not night (20:00-07:00 UTC)", evidence)
    why = f"every GPU ({len(idle)}) idle under {idle_sm:g}% SM since {start:%Y-%m-%d %H:%M} UTC"
    return Verdict(True, why, evidence)
