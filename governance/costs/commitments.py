"""Commitments on plain data: which GPU-hours of a team's jobs a commitment covers, what its usage rows cost
then (FOCUS ListCost, ContractedCost, EffectiveCost, BilledCost), and its unused and purchase rows of a day.
No ORM here; governance/costs/commitment_rows.py reads the inputs and writes the rows.

- Coverage is hourly: in each hour the team's GPUs of the model on the cluster (summed over its jobs) up to the
  commitment's `gpus` are covered, shared among the jobs in proportion to their GPU-hours in that hour.
- Covered GPU-hours cost the committed price (EffectiveCost) and bill nothing (BilledCost 0: the purchase row
  bills them); overage costs the rate card less the negotiated discount (ContractedCost), billed as it is.
- A day's purchase row bills committed GPUs x hours x price (EffectiveCost 0); its unused row costs what the
  jobs did not draw (BilledCost 0), so per commitment and day, billed = the effective cost of covered + unused.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime
from decimal import Decimal

from governance.costs.ledger import (
    DAY,
    HOUR,
    ZERO,
    HourUse,
    JobFacts,
    blank_line,
    day_start,
    quantized,
)
from governance.costs.pricing import gpu_hours
from governance.costs.terms import CommitmentTerm


def hourly_gpu_hours(
    job: JobFacts, model: str, day: date, until: datetime, hours: list[HourUse]
) -> dict[datetime, Decimal]:
    """A job's whole-GPU hours of a model per clock hour of the day, as job_day_rows prices them."""
    first = day_start(day)
    last = min(first + DAY, until)
    out: dict[datetime, Decimal] = defaultdict(Decimal)
    if (held := job.held()) is not None:
        if job.profile or job.model != model:
            return {}
        start, gpus = held
        lo, hi = max(start, first), min(job.end or until, last)
        hour = first
        while hour < hi:
            out[hour] += gpu_hours(max(lo, hour), min(hi, hour + HOUR), gpus)
            hour += HOUR
        return {h: v for h, v in out.items() if v}
    for h in hours:
        if h.profile or (h.model or job.model) != model:
            continue
        lo, hi = max(h.hour, job.start or h.hour, first), min(h.hour + HOUR, job.end or until, last)
        if hi > lo:
            out[h.hour] += gpu_hours(lo, hi, h.gpus_held(lo, hi, first, last))
    return dict(out)


def covered_hours(commitment: CommitmentTerm, by_job: dict[int, dict[datetime, Decimal]]) -> dict[int, Decimal]:
    """Per job, the GPU-hours of the day the commitment covers: each hour up to its GPUs, shared pro rata."""
    hours: set[datetime] = {h for per_hour in by_job.values() for h in per_hour}
    out: dict[int, Decimal] = defaultdict(Decimal)
    for hour in hours:
        held = sum((per_hour.get(hour, ZERO) for per_hour in by_job.values()), ZERO)
        room = commitment.committed_hours(hour, hour + HOUR)
        if not held or not room:
            continue
        share = min(room, held) / held
        for pk, per_hour in by_job.items():
            if per_hour.get(hour):
                out[pk] += per_hour[hour] * share
    return {pk: quantized("gpu_hours", value) for pk, value in out.items()}


def usage_apply(row: dict, commitment: CommitmentTerm, covered: Decimal) -> None:
    """Re-cost one usage row (priced at list) under the commitment: covered hours at the committed price, the
    rest at the contracted rate; idle cost follows the effective cost."""
    hours, list_cost = row["gpu_hours"], row["list_cost"]
    covered = min(covered, hours)
    contracted = quantized("cost", commitment.contracted(list_cost))
    overage = quantized("cost", contracted * (hours - covered) / hours) if hours else ZERO
    cost = quantized("cost", covered * commitment.price) + overage
    idle_share = row["idle_cost"] / row["cost"] if row["cost"] else ZERO
    row.update(cost=cost, contracted_cost=contracted, billed_cost=overage, commitment_gpu_hours=covered,
               commitment_id=commitment.pk, idle_cost=quantized("cost", cost * idle_share))  # fmt: skip


def day_rows(commitment: CommitmentTerm, cluster_id: int, day: date, until: datetime, used_hours: Decimal,
             used_cost: Decimal, currency: str, billed: bool) -> list[dict]:  # fmt: skip
    """The purchase row (the fee, billed) and the unused row (what was not drawn, charged) of one day;
    `used_hours`/`used_cost` are what the day's usage rows drew from the commitment."""
    first = day_start(day)
    lo, hi = max(first, commitment.start), min(first + DAY, until, commitment.end)
    committed = quantized("gpu_hours", commitment.committed_hours(lo, hi))
    if not committed:
        return []
    fee = quantized("cost", committed * commitment.price)
    unused_hours, unused_cost = max(committed - used_hours, ZERO), fee - used_cost

    def row(kind: str, **amounts: Decimal) -> dict:
        return {
            **blank_line(kind, cluster_id, commitment.cluster, day, until, commitment.gpu_model, currency),
            "period_start": lo, "period_end": hi, "team_id": commitment.team_id, "team_name": commitment.team,
            "billed": billed, "commitment_id": commitment.pk, **amounts,
        }  # fmt: skip

    rows = [row("purchase", list_cost=fee, contracted_cost=fee, billed_cost=fee, commitment_gpu_hours=committed)]
    if unused_hours or unused_cost:
        rows.append(row("unused", gpu_hours=unused_hours, cost=unused_cost, commitment_gpu_hours=unused_hours))
    return rows
