"""share_oversized: a job on a share of one GPU (time-slicing, MPS, a fractional request) that uses far less of it.

Where the source split the GPU by process, its samples carry the job's own SM; else the GPU's, which the pods sharing
it add to: read over the job's share, that is the most the job can have used, so the advice never asks for less than
the job could need.
"""

from __future__ import annotations

import math

from governance.efficiency.rules.base import WARNING, Draft, pct, r, rule
from governance.efficiency.summary import JobSummary
from governance.efficiency.thresholds import Thresholds

STEP = 0.05  # shares are suggested in twentieths of a GPU


@rule("share_oversized")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    share = job.gpus_requested
    if share is None or not 0 < share < 1 or len(job.gpus) != 1:
        return []
    own = job.own_sm_mean
    sm = job.sm_mean if own is None else own
    use = sm / 100 / share  # of its share (at most, where sm is the GPU's)
    if use * 100 >= t.share_fit_use_percent:
        return []
    whose = "the GPU's" if own is None else "its own processes'"
    wanted = max(STEP, math.ceil(sm / 100 * t.share_fit_headroom / STEP - 1e-9) * STEP)
    if wanted >= share:
        return []
    return [
        Draft(
            rule="share_oversized",
            severity=WARNING,
            evidence={
                "gpu_share": r(share, 6),
                "sm_mean": r(job.sm_mean, 1),
                "own_sm_mean": None if own is None else r(own, 1),
                "share_used_percent": r(use * 100, 1),
                "suggested_share": r(wanted, 2),
            },
            wasted_hours=job.hours_by_day(lambda h: 1 - wanted / share),
            advice=(
                f"Uses {'at most ' if own is None else ''}{pct(use * 100)} of its {share:g} share of the GPU "
                f"({whose} SM {pct(sm)}): "
                f"request {wanted:.2f} of a GPU, or pack {math.floor(1 / wanted)} pods per GPU instead of "
                f"{math.floor(1 / share)} (time-slicing replicas); it would cost {wanted / share:.0%} of today's."
            ),
            currency=job.currency,
        )
    ]
