"""What an action gives back: the GPU-hours the job would still have held, priced at the job's own ledger rate.

Definition chosen: from the action to the job's time limit (Slurm kills a job at its limit; an idle job does
nothing that ends it sooner, so the limit is when it would have let go). Slurm's collector reports the limit as
the label `time_limit_at`. A job with no known limit (a Kubernetes Deployment, a partition without one) is counted
for REMEDIATION_RECLAIM_HORIZON_HOURS, and the step says so. The money is those hours at the job's rate as the
ledger billed it (its cost over its GPU-hours), so a MIG slice or a committed price counts as billed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import Sum

from governance.costs.models import Charge
from governance.lib import format as fmt
from governance.lib.money import to_cents
from governance.usage.models import Job

SECONDS_PER_HOUR = Decimal(3600)


@dataclass(frozen=True)
class Reclaim:
    gpu_hours: Decimal
    cost: Decimal
    currency: str
    basis: str


def _limit(job: Job) -> datetime | None:
    raw = (job.labels or {}).get("time_limit_at")
    try:
        return datetime.fromisoformat(str(raw).replace("Z", "+00:00")) if raw else None
    except ValueError:
        return None


def job_rate(*, job: Job) -> tuple[Decimal | None, str]:
    """The job's billed cost per GPU-hour over its ledger rows (None: not priced yet)."""
    row = Charge.objects.filter(job_id=job.pk).aggregate(cost=Sum("cost"), hours=Sum("gpu_hours"))
    currency = Charge.objects.filter(job_id=job.pk).values_list("currency", flat=True).first() or "USD"
    if not row["hours"]:
        return None, currency
    return row["cost"] / row["hours"], currency


def reclaim_of(*, job: Job, at: datetime, gpus: Decimal | int) -> Reclaim:
    limit = _limit(job)
    if limit is not None and limit > at:
        hours = Decimal((limit - at).total_seconds()) / SECONDS_PER_HOUR
        basis = f"{fmt.gpus(gpus)} GPU(s) from the action to the time limit {limit.isoformat()}"
    elif limit is not None:
        hours, basis = Decimal(0), "the time limit had passed"
    else:
        horizon = settings.REMEDIATION_RECLAIM_HORIZON_HOURS
        hours = Decimal(horizon)
        basis = f"{fmt.gpus(gpus)} GPU(s) for {horizon:g} h (no time limit known: REMEDIATION_RECLAIM_HORIZON_HOURS)"
    gpu_hours = (hours * gpus).quantize(Decimal("0.0001"))
    rate, currency = job_rate(job=job)
    cost = to_cents(gpu_hours * rate) if rate is not None else Decimal(0)
    if rate is None:
        basis += "; not priced yet (no ledger rows)"
    return Reclaim(gpu_hours, cost, currency, basis)
