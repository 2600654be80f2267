"""Migration check: a project's work on more than one cluster or GPU model, side by side, with a verdict in words.

A phased move to a new cluster generation runs the same work on both for a while. For each recurring workload of the
project (the jobs sharing a `workload`, `name` or `kind` label; the rest together as "other jobs") and each side
(cluster and GPU model) it ran on in the window, from the ledger: runs, GPU-hours, cost, cost per GPU-hour, SM (used
share of the GPU-hours), idle share of the cost, GPU-hours and cost per run, and the mean queue wait (submit to
start) of the runs. Sides are ordered by their first run, so the first is where the work came from. Reads only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db.models import Sum
from django.utils import timezone

from governance.costs.models import Charge, LedgerDay
from governance.efficiency.workloads import workload_key
from governance.lib import format as fmt
from governance.lib.text import csv_safe
from governance.org.models import Project
from governance.usage.models import Job

DEFAULT_DAYS = 90
MAX_DAYS = 366
MIN_RUNS = 2  # per side, before a side is compared
OTHER_JOBS = "other jobs"
SAME = Decimal("0.05")  # cost per run within 5% either way: "about the same"
SM_DROP = 0.05  # SM lower by more than 5 points on the new side explains a dearer run
IDLE_RISE = 0.05


@dataclass
class Side:
    """One workload's runs on one cluster and GPU model in the window."""

    cluster: str
    gpu_model: str
    runs: int = 0
    gpu_hours: Decimal = Decimal(0)
    used_gpu_hours: Decimal = Decimal(0)
    cost: Decimal = Decimal(0)
    idle_cost: Decimal = Decimal(0)
    first_start: datetime | None = None
    waits: list[float] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return self.cluster, self.gpu_model

    @property
    def label(self) -> str:
        return f"{self.gpu_model or 'unknown model'} on {self.cluster}"

    @property
    def cost_per_gpu_hour(self) -> Decimal | None:
        return self.cost / self.gpu_hours if self.gpu_hours else None

    @property
    def sm(self) -> float | None:
        return float(self.used_gpu_hours / self.gpu_hours) if self.gpu_hours else None

    @property
    def idle_share(self) -> float | None:
        return float(self.idle_cost / self.cost) if self.cost else None

    @property
    def gpu_hours_per_run(self) -> Decimal | None:
        return self.gpu_hours / self.runs if self.runs else None

    @property
    def cost_per_run(self) -> Decimal | None:
        return self.cost / self.runs if self.runs else None

    @property
    def queue_wait_hours(self) -> float | None:
        return sum(self.waits) / len(self.waits) if self.waits else None

    def add(self, other: Side) -> None:
        self.runs += other.runs
        self.gpu_hours += other.gpu_hours
        self.used_gpu_hours += other.used_gpu_hours
        self.cost += other.cost
        self.idle_cost += other.idle_cost
        self.waits += other.waits
        if other.first_start and (self.first_start is None or other.first_start < self.first_start):
            self.first_start = other.first_start


@dataclass(frozen=True)
class Workload:
    name: str
    sides: list[Side]  # in the check's side order; only the sides it ran on
    verdict: str


@dataclass(frozen=True)
class MigrationCheck:
    project: Project
    first: date
    last: date
    currency: str
    sides: list[Side]  # the whole project per side, by first run
    workloads: list[Workload]

    @property
    def compared(self) -> bool:
        return len(self.sides) >= 2

    def summary(self) -> str:
        if not self.sides:
            return f"{self.project.name} ran no billed work from {self.first} to {self.last}."
        if not self.compared:
            return (
                f"{self.project.name} ran only on {self.sides[0].label} from {self.first} to {self.last}: "
                "nothing to compare yet."
            )
        told = [w.verdict for w in self.workloads if len(w.sides) >= 2]
        runs = ", ".join(f"{s.runs} runs on {s.label}" for s in self.sides)
        return f"{self.project.name}, {self.first} to {self.last}: {runs}. " + " ".join(told)


def _verdict(name: str, sides: list[Side], currency: str) -> str:
    """Each later side against the first, by cost per run, and why where it costs more."""
    if len(sides) < 2:
        return f"The {name} ran only on {sides[0].label}." if sides else ""
    origin = sides[0]
    said = []
    for side in sides[1:]:
        if origin.runs < MIN_RUNS or side.runs < MIN_RUNS:
            said.append(
                f"The {name}: not enough runs yet to compare {side.label} with {origin.label} ({side.runs} against "
                f"{origin.runs}; {MIN_RUNS} needed on each side)."
            )
            continue
        ratio = side.cost_per_run / origin.cost_per_run if origin.cost_per_run else None  # type: ignore[operator]
        if ratio is None:
            said.append(f"The {name} cost nothing per run on {origin.label}: no ratio to tell.")
            continue
        head = (
            f"On {side.label} the {name} cost {ratio:.2f}x per run ({fmt.money(side.cost_per_run, currency)} against "
            f"{fmt.money(origin.cost_per_run, currency)} on {origin.label}, {side.runs} runs against {origin.runs})"
        )
        sm_new, sm_old = side.sm or 0.0, origin.sm or 0.0
        idle_new, idle_old = side.idle_share or 0.0, origin.idle_share or 0.0
        if ratio < 1 - SAME:
            tail = (
                ": move more of them."
                if sm_new >= sm_old - SM_DROP
                else (
                    f"; SM fell to {fmt.pct(sm_new)} from {fmt.pct(sm_old)}, so retuning batch size and parallelism "
                    "would save more."
                )
            )
        elif ratio <= 1 + SAME:
            tail = ": about the same per run."
        elif sm_new < sm_old - SM_DROP:
            tail = (
                f" because SM stayed at {fmt.pct(sm_new)} (against {fmt.pct(sm_old)}): retune parallelism and batch "
                "size for the new GPUs before moving more."
            )
        elif idle_new > idle_old + IDLE_RISE:
            tail = (
                f" because {fmt.pct(idle_new)} of its cost was idle (against {fmt.pct(idle_old)}): find the idle "
                "hours (data loading, queue waits inside the job) before moving more."
            )
        else:
            tail = (
                f": a GPU-hour costs {fmt.money(side.cost_per_gpu_hour, currency)} against "
                f"{fmt.money(origin.cost_per_gpu_hour, currency)} and the runs are not short enough "
                f"({fmt.hours(side.gpu_hours_per_run)} against {fmt.hours(origin.gpu_hours_per_run)} GPU-hours) to "
                f"pay for it: keep them on {origin.label} or make them use the faster GPUs."
            )
        said.append(head + tail)
    return " ".join(said)


def migration_check(*, project: Project, days: int = DEFAULT_DAYS, today: date | None = None) -> MigrationCheck:
    """The project's usage of the last `days` days (to today) per workload and side: two queries."""
    last = today or timezone.localdate()
    first = last - timedelta(days=days - 1)
    rows = (
        Charge.objects.filter(kind=Charge.Kind.USAGE, project=project, day__gte=first, day__lte=last)
        .exclude(job=None)
        .values("job_id", "cluster_name", "gpu_model", "currency")
        .annotate(h=Sum("gpu_hours"), u=Sum("used_gpu_hours"), c=Sum("cost"), i=Sum("idle_cost"))
    )
    per_job = list(rows)
    jobs = {
        j["pk"]: j
        for j in Job.objects.filter(pk__in={r["job_id"] for r in per_job}).values(
            "pk", "labels", "submit_time", "start_time"
        )
    }
    currencies = {r["currency"] for r in per_job}
    currency = currencies.pop() if len(currencies) == 1 else ""
    by_workload: dict[str, dict[tuple[str, str], Side]] = defaultdict(dict)
    for row in per_job:
        job = jobs[row["job_id"]]
        named = workload_key(job["labels"])
        name = named[1] if named else OTHER_JOBS
        key = (row["cluster_name"], row["gpu_model"])
        side = by_workload[name].setdefault(key, Side(*key))
        side.runs += 1
        side.gpu_hours += row["h"] or 0
        side.used_gpu_hours += row["u"] or 0
        side.cost += row["c"] or 0
        side.idle_cost += row["i"] or 0
        start, submit = job["start_time"], job["submit_time"]
        if start and (side.first_start is None or start < side.first_start):
            side.first_start = start
        if start and submit and start >= submit:
            side.waits.append((start - submit).total_seconds() / 3600)
    totals: dict[tuple[str, str], Side] = {}
    for runs in by_workload.values():
        for key, side in runs.items():
            totals.setdefault(key, Side(*key)).add(side)
    far = timezone.now() + timedelta(days=MAX_DAYS * 10)
    order = sorted(totals, key=lambda k: (totals[k].first_start or far, k))
    workloads = []
    for name in sorted(by_workload, key=lambda n: (n == OTHER_JOBS, n)):
        sides = [by_workload[name][k] for k in order if k in by_workload[name]]
        workloads.append(
            Workload(name, sides, _verdict(f"{name} runs" if name != OTHER_JOBS else name, sides, currency))
        )
    return MigrationCheck(project, first, last, currency, [totals[k] for k in order], workloads)


def projects_to_check(*, team_id: int, days: int = DEFAULT_DAYS, today: date | None = None) -> list[Project]:
    """The team's projects whose billed work ran on more than one cluster or GPU model in the window (one query)."""
    last = today or timezone.localdate()
    first = last - timedelta(days=days - 1)
    # The ledger's per-day summary: a row per project, cluster and model a day, not one per job-day.
    pairs = (
        LedgerDay.objects.filter(kind=Charge.Kind.USAGE, team_id=team_id, day__gte=first, day__lte=last)
        .exclude(project=None)
        .values_list("project_id", "cluster_name", "gpu_model")
        .order_by()
        .distinct()
    )
    seen: dict[int, int] = defaultdict(int)
    for project_id, _, _ in pairs:
        seen[project_id] += 1
    return list(Project.objects.filter(pk__in=[p for p, n in seen.items() if n >= 2]).order_by("name"))


CSV_HEADER = (
    "workload", "cluster", "gpu_model", "runs", "gpu_hours", "cost", "currency", "cost_per_gpu_hour", "sm",
    "idle_share", "gpu_hours_per_run", "cost_per_run", "queue_wait_hours", "verdict",
)  # fmt: skip


def _decimal(value: Decimal | None, places: str) -> str:
    return "" if value is None else str(value.quantize(Decimal(places)))


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def migration_csv_rows(check: MigrationCheck) -> Iterator[list[str]]:
    """One row per workload and side (the workload's verdict on each), then the project's totals as `all`."""
    yield list(CSV_HEADER)
    groups = [(w.name, w.sides, w.verdict) for w in check.workloads] + [("all", check.sides, check.summary())]
    for name, sides, verdict in groups:
        for side in sides:
            yield [
                csv_safe(name), csv_safe(side.cluster), csv_safe(side.gpu_model), str(side.runs),
                _decimal(side.gpu_hours, "0.0001"), _decimal(side.cost, "0.01"), check.currency,
                _decimal(side.cost_per_gpu_hour, "0.0001"), _share(side.sm), _share(side.idle_share),
                _decimal(side.gpu_hours_per_run, "0.0001"), _decimal(side.cost_per_run, "0.01"),
                "" if side.queue_wait_hours is None else f"{side.queue_wait_hours:.2f}", csv_safe(verdict),
            ]  # fmt: skip
