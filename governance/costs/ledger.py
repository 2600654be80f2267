"""The arithmetic of the charge ledger on plain data: a job's day, a cluster's capacity of a day, its unallocated
lines. No ORM here; governance/costs/reprice.py reads the inputs and writes the rows.

- A job's GPUs in an hour are the count its scheduler record declares; where no source knows the count (null or
  0), the GPUs its samples show in that hour (each rollup row is one GPU for one hour, clipped to the job's
  start and end where known; a GPU seen with other jobs too, the job's part of it: allocation.seen_part).
- Cost = GPU-hours x the rate in force at each moment, x the MIG slice's share of a GPU.
- A cluster's capacity of a day is what it declares where it declares any, else the GPUs its collectors saw.
  What no job held is the unallocated line, or, under the share policy, shared among the day's teams in
  proportion to what they were charged.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from governance.costs.allocation import GpuSeen, Held, capacity_intervals, hours_between, seen_part
from governance.costs.pricing import gpu_hours, mig_fraction, price_interval, scale
from governance.costs.terms import SHARE, Terms
from governance.lib.months import Month
from governance.lib.run_spans import Span, held_within

UNATTRIBUTED = "(unattributed)"
UNALLOCATED = "(unallocated)"
# What a line of no project (or no user) is called on the pages, by its kind; a correction by the kind it corrects.
UNNAMED = {
    "unallocated": UNALLOCATED,
    "shared": "(share of unallocated)",
    "unused": "(unused commitment)",
    "purchase": "(commitment purchase)",
}
ZERO = Decimal(0)
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
HOURS_PLACES = Decimal("0.000001")
MONEY_PLACES = Decimal("0.0000000001")
AMOUNTS = (
    "gpu_hours", "used_gpu_hours", "idle_gpu_hours", "cost", "idle_cost", "energy_kwh", "energy_cost", "carbon_kg",
    "list_cost", "contracted_cost", "billed_cost", "commitment_gpu_hours",
)  # fmt: skip
MONEY_FIELDS = frozenset({"cost", "idle_cost", "energy_cost", "list_cost", "contracted_cost", "billed_cost"})
# Without a commitment every FOCUS cost column of a row is its cost.
FOCUS_COSTS = ("list_cost", "contracted_cost", "billed_cost")


def day_start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def month_of(day: date) -> Month:
    return Month(day.year, day.month)


def quantized(name: str, value: Decimal) -> Decimal:
    """An amount at the precision the ledger stores, so sums in the database equal sums here."""
    return value.quantize(MONEY_PLACES if name in MONEY_FIELDS else HOURS_PLACES)


@dataclass(slots=True)
class JobFacts:
    pk: int
    ref: str
    cluster_id: int
    cluster: str
    user: str
    gpus: Decimal | int | None  # a share of one GPU where it holds one (0.25)
    model: str
    start: datetime | None
    end: datetime | None
    project_id: int | None
    project: str
    team_id: int | None
    team: str
    profile: str = ""  # the MIG profile its GPUs are (empty: whole GPUs)
    token_id: int | None = None  # the ingest token whose batch wrote its record
    token: str = ""
    runs: list[Span] | None = None  # when it held its GPUs where it ran more than once (None: start to end)

    @property
    def declared(self) -> bool:
        return self.held() is not None

    def held(self) -> tuple[datetime, Decimal | int] | None:
        """Since when and how many GPUs its scheduler says the job holds; None where no source knows the count."""
        if self.gpus and self.start is not None:
            return self.start, self.gpus
        return None


def gpu_share(gpus: Decimal | int | None) -> Decimal | None:
    """The share of one GPU a job declared, where it holds less than one (0.47); None for whole or unknown GPUs."""
    return Decimal(gpus) if gpus is not None and 0 < gpus < 1 else None


def line_name(name: str, kind: str, corrected_kind: str = "") -> str:
    """A row's project or user name on the pages, or what kind of line it is where it has none."""
    return name or UNNAMED.get(corrected_kind or kind, "(none)")


@dataclass(slots=True)
class HourUse:
    """A job's rollups for one hour on GPUs of one model and MIG profile."""

    hour: datetime
    model: str
    profile: str
    gpus: int
    samples: int = 0
    idle: int = 0
    sm: float = 0.0
    power: float = 0.0
    power_samples: int = 0
    sm_samples: int = 0
    shared: list[Decimal] = field(default_factory=list)  # the weights of its GPUs other jobs were seen on too

    def gpus_held(self, lo: datetime, hi: datetime, first: datetime, last: datetime) -> int | Decimal:
        """How many GPUs it held over lo..hi of the hour (the day priced from first to last): each GPU it held
        alone, and its part of each GPU it shared."""
        if not self.shared:
            return self.gpus
        part = hours_between(lo, hi)
        whole = hours_between(max(self.hour, first), min(self.hour + HOUR, last))
        shared = sum((seen_part(part, whole, w) for w in self.shared), ZERO)
        return self.gpus - len(self.shared) + shared / part


@dataclass(slots=True)
class Use:
    """A job's rollups over a day. Shares are of the samples that knew the GPU's SM: an unknown SM is neither
    used nor idle."""

    samples: int = 0
    idle: int = 0
    sm: float = 0.0
    power: float = 0.0
    power_samples: int = 0
    sm_samples: int = 0

    def add(self, h: HourUse) -> None:
        self.samples += h.samples
        self.idle += h.idle
        self.sm += h.sm or 0.0
        self.power += h.power or 0.0
        self.power_samples += h.power_samples
        self.sm_samples += h.sm_samples

    def shares(self) -> tuple[Decimal, Decimal, Decimal | None]:
        """(used share, idle share, mean power in kW or None) of the sampled time."""
        kw = Decimal(repr(self.power)) / self.power_samples / 1000 if self.power_samples else None
        if not self.sm_samples:
            return ZERO, ZERO, kw
        used = Decimal(repr(self.sm)) / self.sm_samples / 100
        idle = Decimal(self.idle) / self.sm_samples
        return min(max(used, ZERO), Decimal(1)), min(idle, Decimal(1)), kw


def _row(job: JobFacts, day: date, lo: datetime, hi: datetime, model: str, profile: str, hours: Decimal,
         cost: Decimal, use: Use, terms: Terms, currency: str) -> dict:  # fmt: skip
    pricing = terms.book.pricing(job.cluster, model)
    used, idle, kw = use.shares()
    kwh = hours * kw if kw is not None else ZERO
    amounts = {
        "gpu_hours": hours, "used_gpu_hours": hours * used, "idle_gpu_hours": hours * idle, "cost": cost,
        "idle_cost": cost * idle, "energy_kwh": kwh, "energy_cost": kwh * (pricing.energy_price_per_kwh or ZERO),
        "carbon_kg": kwh * terms.intensity(job.cluster, day_start(day) + DAY),
        **{name: cost for name in FOCUS_COSTS}, "commitment_gpu_hours": ZERO,
    }  # fmt: skip
    return {
        "kind": "usage", "month": month_of(day).start.date(), "day": day, "period_start": lo, "period_end": hi,
        "cluster_id": job.cluster_id, "cluster_name": job.cluster, "job_id": job.pk, "job_ref": job.ref,
        "user_name": job.user, "team_id": job.team_id, "team_name": job.team or UNATTRIBUTED,
        "project_id": job.project_id, "project_name": job.project, "gpu_model": model, "mig_profile": profile,
        "currency": currency, "at_default_rate": pricing.at_default, "commitment_id": None,
        "billed": terms.billed(job.cluster, day_start(day) + DAY), "gpu_share": gpu_share(job.gpus),
        **{name: quantized(name, value) for name, value in amounts.items()},
    }  # fmt: skip


def job_day_rows(job: JobFacts, day: date, until: datetime, hours: list[HourUse], terms: Terms) -> list[dict]:
    """The usage rows of one job's day, priced up to `until` (now, for a running job)."""
    first = day_start(day)
    last = min(first + DAY, until)
    currency = terms.currency
    if (held := job.held()) is not None:
        start, gpus = held
        stretches = held_within(job.runs, max(start, first), min(job.end or until, last))
        if not stretches:
            return []
        use = Use()
        for h in hours:
            use.add(h)
        fraction = mig_fraction(job.model, job.profile)
        rates = terms.book.pricing(job.cluster, job.model).rates
        runs = [price_interval(lo, hi, gpus, rates) for lo, hi in stretches]
        gpu_hours_, cost = sum((p.gpu_hours for p in runs), ZERO), sum((p.cost for p in runs), ZERO)
        return [_row(job, day, stretches[0][0], stretches[-1][1], job.model, job.profile, scale(gpu_hours_, fraction),
                     scale(cost, fraction), use, terms, currency)]  # fmt: skip
    # No source knows the count: the GPUs the samples show, hour by hour, on the models they ran on.
    by_sku: dict[tuple[str, str], list] = {}
    for h in hours:
        lo, hi = max(h.hour, job.start or h.hour, first), min(h.hour + HOUR, job.end or until, last)
        stretches = held_within(job.runs, lo, hi)
        if not stretches:
            continue
        model = h.model or job.model
        fraction = mig_fraction(model, h.profile)
        rates = terms.book.pricing(job.cluster, model).rates
        entry = by_sku.setdefault((model, h.profile), [stretches[0][0], stretches[-1][1], ZERO, ZERO, Use()])
        entry[0], entry[1] = min(entry[0], stretches[0][0]), max(entry[1], stretches[-1][1])
        for lo, hi in stretches:
            priced = price_interval(lo, hi, h.gpus_held(lo, hi, first, last), rates)
            entry[2] += scale(priced.gpu_hours, fraction)
            entry[3] += scale(priced.cost, fraction)
        entry[4].add(h)
    return [
        _row(job, day, lo, hi, model, profile, hours_, cost, use, terms, currency)
        for (model, profile), (lo, hi, hours_, cost, use) in sorted(by_sku.items())
    ]


def allocated_rows(job: JobFacts, day: date, held: dict[tuple[str, str], Held], hours: list[HourUse],
                   terms: Terms) -> list[dict]:  # fmt: skip
    """The usage rows of one job's day as allocation billed it (a cluster-day whose claims are priced together),
    each stretch at the rate in force then."""
    rows = []
    for (model, profile), h in sorted(held.items()):
        mig_fraction(model, profile)  # a profile nobody knows was no claim: this job-day fails, and is listed
        if not h.claimed:
            continue
        rates = terms.book.pricing(job.cluster, model).rates
        cost = sum((price_interval(lo, hi, 1, rates).cost * billed / gpu_hours(lo, hi, 1)
                    for lo, hi, billed in h.stretches), ZERO)  # fmt: skip
        spans = h.stretches or [(day_start(day), day_start(day), ZERO)]
        use = Use()
        for u in hours:
            if job.declared or (u.model or job.model, u.profile) == (model, profile):
                use.add(u)
        lo, hi = min(s[0] for s in spans), max(s[1] for s in spans)
        rows.append(_row(job, day, lo, hi, model, profile, h.billed, cost, use, terms, terms.currency))
    return rows


@dataclass
class Capacity:
    gpu_hours: Decimal = ZERO
    cost: Decimal = ZERO


def day_capacity(
    cluster: str, day: date, until: datetime, gpus: list[GpuSeen], terms: Terms, grace: timedelta
) -> dict[str, Capacity]:
    """Per GPU model, the GPU-hours and cost a cluster could bill on a day of a period that runs until `until`
    (the month's end, or now while it runs): what it has (governance/costs/allocation.py) over the day."""
    first = day_start(day)
    end = min(first + DAY, until)
    out: dict[str, Capacity] = defaultdict(Capacity)
    if end <= first:
        return {}
    intervals = capacity_intervals(cluster, first, end, until, gpus, terms, grace)
    for (model, fraction, lo, hi), count in intervals.items():
        rates = terms.book.pricing(cluster, model).rates
        cap = out[model]
        cap.gpu_hours += scale(gpu_hours(lo, hi, 1), fraction) * count
        cap.cost += scale(price_interval(lo, hi, 1, rates).cost, fraction) * count
    return {m: Capacity(quantized("gpu_hours", c.gpu_hours), quantized("cost", c.cost)) for m, c in out.items()}


@dataclass
class Allocated:
    """What the day's usage rows of a cluster add up to per GPU model, and what each team was charged on the
    cluster in the whole month (the weights of the shares)."""

    by_model: dict[str, Capacity] = field(default_factory=lambda: defaultdict(Capacity))
    month_teams: dict[tuple[int | None, str], Decimal] = field(default_factory=lambda: defaultdict(Decimal))


def blank_line(kind: str, cluster_id: int, cluster: str, day: date, until: datetime, model: str, currency: str) -> dict:
    """A cluster-day line of no job and no team, all amounts zero: the caller fills in what it is."""
    first = day_start(day)
    return {
        "kind": kind, "month": month_of(day).start.date(), "day": day, "period_start": first,
        "period_end": min(first + DAY, max(until, first)), "cluster_id": cluster_id, "cluster_name": cluster,
        "job_id": None, "job_ref": "", "user_name": "", "team_id": None, "team_name": UNALLOCATED, "project_id": None,
        "project_name": "", "gpu_model": model, "mig_profile": "", "currency": currency, "at_default_rate": False,
        "commitment_id": None, **{name: ZERO for name in AMOUNTS},
    }  # fmt: skip


def unallocated_rows(
    cluster_id: int, cluster: str, day: date, until: datetime, capacity: dict[str, Capacity], allocated: Allocated,
    terms: Terms,
) -> list[dict]:  # fmt: skip
    """The day's unallocated line per model, or under the share policy each team's share of it, in proportion to
    what the team was charged on the cluster that month (as the month stands: an open month's shares move)."""
    currency = terms.currency
    share = terms.policy(cluster, day_start(day) + DAY) == SHARE
    billed = terms.billed(cluster, day_start(day) + DAY)
    weights = {t: c for t, c in allocated.month_teams.items() if c > 0}
    rows = []
    for model, cap in sorted(capacity.items()):
        used = allocated.by_model.get(model, Capacity())
        hours, cost = max(cap.gpu_hours - used.gpu_hours, ZERO), max(cap.cost - used.cost, ZERO)
        if not hours and not cost:
            continue
        if not share or not weights:
            line = blank_line("unallocated", cluster_id, cluster, day, until, model, currency)
            line.update(gpu_hours=quantized("gpu_hours", hours), cost=quantized("cost", cost))
            rows.append(line)
            continue
        rows.extend(_shares(cluster_id, cluster, day, until, model, currency, hours, cost, weights))
    for row in rows:
        row["billed"] = billed
        row.update((name, row["cost"]) for name in FOCUS_COSTS)
    return rows


def _shares(cluster_id, cluster, day, until, model, currency, hours, cost, weights) -> list[dict]:
    total = sum(weights.values(), ZERO)
    ordered = sorted(weights.items(), key=lambda item: (item[0][1], item[0][0] or 0))
    given_hours = given_cost = ZERO
    rows = []
    for i, ((team_id, name), weight) in enumerate(ordered):
        if i == len(ordered) - 1:  # the remainder, so the shares add up to the pool exactly
            part_hours, part_cost = hours - given_hours, cost - given_cost
        else:
            part_hours = quantized("gpu_hours", hours * weight / total)
            part_cost = quantized("cost", cost * weight / total)
        given_hours += part_hours
        given_cost += part_cost
        line = blank_line("shared", cluster_id, cluster, day, until, model, currency)
        line.update(team_id=team_id, team_name=name, gpu_hours=quantized("gpu_hours", part_hours),
                    cost=quantized("cost", part_cost))  # fmt: skip
        rows.append(line)
    return rows
