"""idle_gpu: a held GPU averages under the idle SM threshold for a stretch of at least the minimum time.

Rollups are hourly, so a stretch is a run of consecutive hours whose mean SM is under the threshold, plus the
idle samples of the hours on either side of it (the tail of the last busy hour, the head of the next one).
An hour with enough idle samples on its own is a stretch too. This catches a GPU that goes idle after work.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from governance.efficiency.idle_patterns import AFTER_WORK, FROM_START, INTERMITTENT, NIGHT, IdlePattern, idle_pattern
from governance.efficiency.idle_patterns import interactive as is_interactive
from governance.efficiency.rules.base import CRITICAL, WARNING, Draft, pct, r, rule
from governance.efficiency.summary import GpuSummary, HourStat, JobSummary
from governance.efficiency.thresholds import Thresholds
from governance.lib.money import to_cents

HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class Stretch:
    since: datetime
    until: datetime
    idle_samples: int
    parts: tuple[tuple[datetime, int], ...] = ()  # (hour, idle samples counted from it)


def _next(earlier: HourStat, later: HourStat) -> bool:
    return later.hour - earlier.hour == HOUR


def idle_stretches(hours: tuple[HourStat, ...], idle_sm: float) -> list[Stretch]:
    ordered = sorted(hours, key=lambda h: h.hour)
    stretches: list[Stretch] = []
    claimed: set[datetime] = set()
    i = 0
    while i < len(ordered):
        if ordered[i].sm_mean >= idle_sm:
            i += 1
            continue
        j = i
        while j + 1 < len(ordered) and ordered[j + 1].sm_mean < idle_sm and _next(ordered[j], ordered[j + 1]):
            j += 1
        parts = [(h.hour, h.idle_samples) for h in ordered[i : j + 1]]
        since, until = ordered[i].hour, ordered[j].hour + HOUR
        before = ordered[i - 1] if i > 0 and _next(ordered[i - 1], ordered[i]) else None
        after = ordered[j + 1] if j + 1 < len(ordered) and _next(ordered[j], ordered[j + 1]) else None
        if before is not None and before.hour not in claimed and before.idle_samples:
            parts.append((before.hour, before.idle_samples))
            claimed.add(before.hour)
        if after is not None and after.idle_samples:
            parts.append((after.hour, after.idle_samples))
            claimed.add(after.hour)
        stretches.append(Stretch(since, until, sum(n for _, n in parts), tuple(parts)))
        i = j + 1
    for h in ordered:
        if h.sm_mean >= idle_sm and h.hour not in claimed and h.idle_samples:
            stretches.append(Stretch(h.hour, h.hour + HOUR, h.idle_samples, ((h.hour, h.idle_samples),)))
    return stretches


def _label(gpu: GpuSummary) -> str:
    return f"{gpu.node}:{gpu.index}"


def _pattern(gpu: GpuSummary, t: Thresholds, interactive: bool) -> IdlePattern | None:
    hours = [(h.hour, h.sm_mean if h.sm_known else None) for h in gpu.hours]
    return idle_pattern(hours, t.idle_sm_percent, is_interactive=interactive)


ADVICE = {
    AFTER_WORK: " after doing work: release the GPUs when the work is done (end the job, or exit after training)",
    FROM_START: ": the job never used {them}, so check that the code runs on the GPU (device placement, CUDA visible)",
    INTERMITTENT: (
        ", in {between} idle hours between busy ones while the job ran ({switches} switches between idle and busy): "
        "the GPU waits on something (data loading, checkpoints, evaluation or a queue); prefetch and cache the input "
        "(more data-loader workers), checkpoint asynchronously, evaluate less often or elsewhere, or scale "
        "elastically so the idle GPUs go back to the pool"
    ),
    NIGHT: (
        ", mostly at night (20:00-07:00 UTC) in an interactive session: stop idle sessions automatically "
        "(an idle auto-stop or culling timeout) and start them again when needed"
    ),
}


@rule("idle_gpu")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    per_sample = job.hours_per_sample
    found = []
    for gpu in job.gpus:
        stretches = idle_stretches(gpu.hours, t.idle_sm_percent)
        long_enough = [s for s in stretches if s.idle_samples * per_sample * 60 >= t.idle_min_minutes]
        if long_enough:
            found.append((gpu, long_enough))
    if not found:
        return []
    idle_gpu_hours = sum(s.idle_samples * per_sample for _, stretches in found for s in stretches)
    by_day: dict[date, float] = defaultdict(float)
    for _, stretches in found:
        for s in stretches:
            for hour, n in s.parts:
                by_day[hour.date()] += n * per_sample
    idle_cost = job.cost(idle_gpu_hours)
    evidence_gpus = [
        {
            "gpu": _label(gpu),
            "idle_hours": r(sum(s.idle_samples for s in stretches) * per_sample),
            "since": min(s.since for s in stretches).isoformat(),
            "sm_mean_overall": r(gpu.sm_mean, 1),
        }
        for gpu, stretches in found
    ]
    session = is_interactive(job.labels)
    patterns = {gpu.gpu_id: _pattern(gpu, t, session) for gpu, _ in found}
    for entry, (gpu, _) in zip(evidence_gpus, found, strict=True):
        entry["pattern"] = p.pattern if (p := patterns[gpu.gpu_id]) else INTERMITTENT
    main = max(
        (p for p in patterns.values() if p is not None),
        key=lambda p: len(p.idle_hours),
        default=IdlePattern(INTERMITTENT, (), 0, 0, 0, 0),
    )
    first = evidence_gpus[0]
    what = (
        f"GPU {first['gpu']} sat idle (under {pct(t.idle_sm_percent)} SM) for {first['idle_hours']:.1f} h"
        if len(found) == 1
        else f"{len(found)} GPUs sat idle (under {pct(t.idle_sm_percent)} SM) for {idle_gpu_hours:.1f} GPU-hours in all"
    )
    why = ADVICE[main.pattern].format(
        them="it" if len(found) == 1 else "them", between=main.idle_between, switches=main.switches
    )
    money = f"; that idle time cost {idle_cost:,.2f} {job.currency}" if job.rate is not None else ""
    severity = CRITICAL if idle_gpu_hours >= 0.5 * job.allocated_gpu_hours else WARNING
    return [
        Draft(
            rule="idle_gpu",
            severity=severity,
            evidence={
                "idle_gpu_hours": r(idle_gpu_hours),
                "idle_cost": str(to_cents(idle_cost)),
                "rate_per_gpu_hour": str(job.rate) if job.rate is not None else None,
                "idle_sm_percent": t.idle_sm_percent,
                "idle_pattern": main.pattern,
                "idle_hours_after_work": main.idle_after_work,
                "idle_hours_between_work": main.idle_between,
                "gpus": evidence_gpus,
            },
            wasted_hours=dict(by_day),
            advice=f"{what}{why}{money}.",
            currency=job.currency,
        )
    ]
