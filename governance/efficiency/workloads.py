"""Recurring work: the jobs of one project and user that share a name (a `workload`, job `name` or `kind` label), and
what a finding's advice would have saved across them over the savings window. Reads only.

Each job's finding carries its own share of the saving (a partition of the job's ledger rows, so totals add up); the
workload's figure is the sum of those shares over its runs in the window, shown beside the finding, never stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.db.models import Count, Max, Sum

from governance.costs.models import Charge
from governance.efficiency.models import Finding
from governance.lib.money import format_money
from governance.usage.models import Job

WORKLOAD_LABELS = ("workload", "name", "kind")


@dataclass(frozen=True)
class WorkloadSavings:
    """One rule's saving across the runs of a recurring workload since `since`."""

    label: str
    name: str
    project: str
    runs: int
    cost: Decimal
    savings: Decimal
    currency: str
    since: date

    @property
    def share(self) -> float:
        return float(self.savings / self.cost) if self.cost else 0.0

    def text(self) -> str:
        return (
            f"The {self.name} runs of {self.project} ({self.runs} since {self.since:%Y-%m-%d}) cost "
            f"{format_money(self.cost, self.currency)}; following this advice would have saved "
            f"{format_money(self.savings, self.currency)} of it ({self.share:.0%})."
        )


def workload_key(labels: dict[str, str] | None) -> tuple[str, str] | None:
    """The label that names a job's recurring work, first of WORKLOAD_LABELS; None: the job is its own workload."""
    for key in WORKLOAD_LABELS:
        value = (labels or {}).get(key)
        if isinstance(value, str) and value:
            return key, value
    return None


def workload_savings(*, finding: Finding) -> WorkloadSavings | None:
    """The finding's rule over the runs of its job's workload in the finding's savings window (three queries); None
    where the job is its own workload or the only run of it in the window."""
    job = finding.job
    key = workload_key(job.labels)
    project = job.project
    if key is None or project is None or finding.savings_from is None:
        return None
    runs = Job.objects.filter(project=project, user_name=job.user_name, **{f"labels__{key[0]}": key[1]})
    usage = Charge.objects.filter(kind=Charge.Kind.USAGE, job__in=runs, day__gte=finding.savings_from)
    totals = usage.aggregate(cost=Sum("cost"), runs=Count("job_id", distinct=True), currency=Max("currency"))
    if not totals["runs"] or totals["runs"] < 2:
        return None
    saved = Finding.objects.filter(
        job__in=runs, rule=finding.rule, savings_from__isnull=False, savings_from__gte=finding.savings_from
    ).aggregate(s=Sum("savings"))["s"]
    return WorkloadSavings(
        label=key[0],
        name=key[1],
        project=project.name,
        runs=totals["runs"],
        cost=totals["cost"],
        savings=saved or Decimal(0),
        currency=totals["currency"],
        since=finding.savings_from,
    )
