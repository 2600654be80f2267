"""Recurring work: the jobs of one project and user that share a name (a `workload`, job `name` or `kind` label), what
a finding's advice would have saved across them over the savings window, and, once it is resolved, what taking it
saved (runs after against runs before). Reads only.

Each job's finding carries its own share of the saving (a partition of the job's ledger rows, so totals add up); the
workload's figure is the sum of those shares over its runs in the window, shown beside the finding, never stored.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import reduce
from operator import or_

from django.db.models import Count, Max, Q, QuerySet, Sum

from governance.costs.models import Charge, JobMonth
from governance.efficiency.models import Finding
from governance.efficiency.waste import SAVINGS_WINDOW_DAYS
from governance.lib.money import format_money, to_cents
from governance.usage.models import Job

WORKLOAD_LABELS = ("workload", "name", "kind")
Workload = tuple[int, str, str, str]  # project id, user name, label, its value: one recurring work


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
    # The runs billed in the window; each run's saving is its own share, kept to the window as it moves.
    in_window = usage.values("job_id")
    saved = Finding.objects.filter(job_id__in=in_window, rule=finding.rule, savings_from__isnull=False).aggregate(
        s=Sum("savings")
    )["s"]
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


MIN_RUNS = 2  # on each side, before a before/after comparison is told


@dataclass(frozen=True)
class Runs:
    """One side of a before/after comparison: the workload's runs and their ledger totals."""

    runs: int
    gpu_hours: Decimal
    used_gpu_hours: Decimal
    cost: Decimal

    @property
    def gpu_hours_per_run(self) -> Decimal:
        return self.gpu_hours / self.runs if self.runs else Decimal(0)

    @property
    def cost_per_run(self) -> Decimal:
        return self.cost / self.runs if self.runs else Decimal(0)

    @property
    def sm(self) -> float:
        return float(self.used_gpu_hours / self.gpu_hours) if self.gpu_hours else 0.0


@dataclass(frozen=True)
class Realised:
    """What taking a finding's advice saved: the workload's runs started after it was resolved against those before."""

    since: datetime
    before: Runs
    after: Runs
    currency: str

    @property
    def enough(self) -> bool:
        return self.before.runs >= MIN_RUNS and self.after.runs >= MIN_RUNS

    @property
    def saved_per_run(self) -> Decimal:
        return to_cents(self.before.cost_per_run - self.after.cost_per_run)

    @property
    def saved(self) -> Decimal:
        return to_cents((self.before.cost_per_run - self.after.cost_per_run) * self.after.runs)

    def text(self) -> str:
        when = f"Since it was resolved on {self.since:%Y-%m-%d}"
        if not self.enough:
            return (
                f"{when}: not enough runs yet to tell what it saved ({self.before.runs} before, {self.after.runs} "
                f"after; {MIN_RUNS} needed on each side)."
            )
        money = self.currency
        return (
            f"{when}: {self.after.runs} runs after against {self.before.runs} before: "
            f"{self.after.gpu_hours_per_run:.1f} against {self.before.gpu_hours_per_run:.1f} GPU-hours per run, "
            f"SM {self.after.sm:.0%} against {self.before.sm:.0%}, {format_money(self.after.cost_per_run, money)} "
            f"against {format_money(self.before.cost_per_run, money)} per run: "
            f"{format_money(self.saved_per_run, money)} saved per run, {format_money(self.saved, money)} so far."
        )


def _runs(billed: list[dict]) -> Runs:
    """The runs among `billed` (a job's usage summed, per job) and their totals."""
    zero = Decimal(0)
    return Runs(len(billed), sum((r["h"] for r in billed), zero), sum((r["u"] for r in billed), zero),
                sum((r["c"] for r in billed), zero))  # fmt: skip


def realised_savings(*, finding: Finding) -> Realised | None:
    """For a resolved finding on recurring work: the workload's runs started after the resolution against those
    started in the savings window before it; None where the finding is not resolved or its job is its own workload."""
    return realised_savings_of([finding]).get(finding.pk)


def realised_savings_of(findings: Iterable[Finding]) -> dict[int, Realised]:
    """`realised_savings` of each finding, by pk (those it is None for left out), in two queries however many there
    are: the runs of all their workloads since the earliest window, then those runs' usage summed from the job-month
    summary (which equals the ledger: a few rows per run, where the ledger holds one per run and day)."""
    asked: list[tuple[Finding, Workload, datetime]] = []
    earliest: dict[Workload, datetime] = {}
    for finding in findings:
        job = finding.job
        key = workload_key(job.labels)
        if finding.state != Finding.State.RESOLVED or finding.resolved_at is None or key is None:
            continue
        if job.project_id is None:
            continue
        workload = (job.project_id, job.user_name, *key)
        window = finding.resolved_at - timedelta(days=SAVINGS_WINDOW_DAYS)
        asked.append((finding, workload, window))
        earliest[workload] = min(window, earliest.get(workload, window))
    if not asked:
        return {}
    wanted = [Q(project_id=project, user_name=user, start_time__gte=since, **{f"labels__{label}": name})
              for (project, user, label, name), since in earliest.items()]  # fmt: skip
    runs = Job.objects.filter(reduce(or_, wanted)).values_list("pk", "start_time", "project_id", "user_name", "labels")
    of_user: dict[tuple[int, str], list[Workload]] = defaultdict(list)
    for workload in earliest:
        of_user[workload[:2]].append(workload)
    started: dict[Workload, list[tuple[int, datetime]]] = defaultdict(list)
    for pk, at, project, user, labels in runs:
        if at is None:  # not started: the filter keeps none of these
            continue
        for workload in of_user[(project, user)]:
            if (labels or {}).get(workload[2]) == workload[3]:
                started[workload].append((pk, at))
    ids = {pk for pairs in started.values() for pk, _ in pairs}
    billed = {
        r["job_id"]: r
        for r in JobMonth.objects.filter(job_id__in=sorted(ids))
        .values("job_id")
        .annotate(h=Sum("gpu_hours"), u=Sum("used_gpu_hours"), c=Sum("cost"))
        .order_by()
    }
    out = {}
    for finding, workload, window in asked:
        since = finding.resolved_at
        assert since is not None  # only resolved findings were asked
        mine = [(billed[pk], at) for pk, at in started[workload] if at >= window and pk in billed]
        before = _runs([row for row, at in mine if at < since])
        after = _runs([row for row, at in mine if at >= since])
        out[finding.pk] = Realised(since, before, after, finding.currency)
    return out


TAKEN_LIMIT = 200  # findings measured per team month


@dataclass(frozen=True)
class Taken:
    """One finding resolved in the month and, for recurring work, what taking it has saved so far."""

    finding: Finding
    realised: Realised | None

    @property
    def measured(self) -> bool:
        return self.realised is not None and self.realised.enough

    def text(self) -> str:
        if self.realised is None:
            return "A single job, not recurring work: nothing to compare it with."
        return self.realised.text()


@dataclass(frozen=True)
class AdviceTaken:
    """A team's month: the findings resolved in it and what taking their advice saved (measured ones only)."""

    taken: list[Taken]
    currency: str
    resolved: int  # all resolved in the month; `taken` holds the latest TAKEN_LIMIT of them

    @property
    def measured(self) -> list[Taken]:
        return [t for t in self.taken if t.measured]

    @property
    def saved(self) -> Decimal:
        return sum((t.realised.saved for t in self.measured if t.realised), Decimal(0))

    def text(self) -> str:
        if not self.taken:
            return "No advice was taken this month (no finding of the team's jobs was resolved)."
        measured = self.measured
        waiting = len(self.taken) - len(measured)
        head = f"Advice taken this month: {self.resolved} finding{'s' if self.resolved != 1 else ''} resolved"
        if self.resolved > len(self.taken):
            head += f" (the latest {len(self.taken)} measured)"
        if not measured:
            return f"{head}; none has enough runs after it yet to tell what it saved."
        rest = f"; {waiting} not measured yet (single jobs, or fewer than {MIN_RUNS} runs on a side)" if waiting else ""
        return (
            f"{head}; {len(measured)} measured on the runs since, saving {format_money(self.saved, self.currency)} "
            f"so far{rest}."
        )


def advice_taken(*, findings: QuerySet[Finding], first: datetime, end: datetime, currency: str) -> AdviceTaken:
    """The given findings (a team's, as the reader may see them) resolved in [first, end), newest first, each with
    its realised savings (two queries for them all)."""
    resolved = findings.filter(state=Finding.State.RESOLVED, resolved_at__gte=first, resolved_at__lt=end)
    latest = resolved.order_by("-resolved_at", "-pk")[:TAKEN_LIMIT]
    found = list(latest)
    realised = realised_savings_of(found)
    taken = [Taken(f, realised.get(f.pk)) for f in found]
    return AdviceTaken(taken, currency, resolved.count() if len(taken) == TAKEN_LIMIT else len(taken))
