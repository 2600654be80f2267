"""Who holds a GPU-hour: a cluster's GPUs of one model in one hour, shared among the jobs that claim them. Plain
data in and out; governance/costs/contention.py reads the inputs, governance/costs/ledger.py prices the result.

- The GPUs a cluster has in an hour: its declared capacity where it declares any, else the GPUs known to the fleet
  (each from the hour of its first report to the hour after its last, or until now while it reports), never a GPU
  an admin has not confirmed beyond declared capacity.
- Where samples show which GPU a job held, the hour of that GPU goes to that job. A GPU seen with several jobs in
  one hour (one handed over to the next, or pods time-slicing it) goes to each by the time it was seen on it: its
  samples over every job's samples on the GPU then, and never more than the part of the hour it held its GPUs. A
  GPU not confirmed is never billed.
- A declared count fills, beyond the GPUs the job was seen on, only what is left of the hour after the sampled GPUs
  and the GPUs samples show free, scaled down pro rata when the counts claim more. Samples vouch for a GPU's free
  time only up to its last sample: a claim's edge within an interval of them (a job that began between two samples)
  may have taken it (vouched_free).
- What a job claimed and was not billed is an over-claim.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import cast

from collectors.mig import UnknownMigProfile
from governance.costs.pricing import mig_fraction, mig_share
from governance.costs.terms import Terms
from governance.lib.run_spans import Span, held_within

ZERO = Decimal(0)
ONE = Decimal(1)
HOUR = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class GpuSeen:
    """A GPU (or MIG instance) as the inventory knows it: what it is and when collectors first and last saw it."""

    model: str
    profile: str
    first_seen: datetime
    last_seen: datetime


def floor_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def hours_between(lo: datetime, hi: datetime) -> Decimal:
    """The length of lo..hi in hours, exactly (0 when hi is not after lo)."""
    if hi <= lo:
        return ZERO
    held = hi - lo
    return Decimal((held.days * 86_400 + held.seconds) * 1_000_000 + held.microseconds) / 3_600_000_000


Intervals = dict[tuple[str, Fraction, datetime, datetime], int]


def capacity_intervals(
    cluster: str, first: datetime, end: datetime, until: datetime, gpus: Sequence[GpuSeen], terms: Terms,
    grace: timedelta,
) -> Intervals:  # fmt: skip
    """(model, share of a GPU, from, to) -> how many GPUs a cluster has over first..end: its declared capacity where
    it declares any, else the GPUs seen (confirmed ones: the caller leaves the others out), each from the hour of
    its first report to the hour after its last, or to `until` if it reported within `grace` of it."""
    intervals: Intervals = defaultdict(int)
    if end <= first:
        return intervals
    if terms.declares(cluster, end):
        for (where, model), steps in terms.declared.items():
            if where != cluster:
                continue
            for i, (since, count) in enumerate(steps):
                upto = steps[i + 1][0] if i + 1 < len(steps) else end
                lo, hi = max(since, first), min(upto, end)
                if hi > lo and count:
                    intervals[(model, Fraction(1), lo, hi)] += count
        return intervals
    for g in gpus:
        lo, hi = floor_hour(g.first_seen), floor_hour(g.last_seen) + HOUR
        if g.last_seen >= until - grace:
            hi = max(hi, until)
        lo, hi = max(lo, first), min(hi, end)
        if hi > lo:
            try:
                fraction = mig_fraction(g.model, g.profile)
            except UnknownMigProfile:
                continue  # not priced: the job-days on it fail and are listed; capacity does not guess its share
            intervals[(g.model, fraction, lo, hi)] += 1
    return intervals


def capacity_by_hour(intervals: Intervals) -> dict[str, dict[datetime, Decimal]]:
    """Per model and hour, the GPU-hours the intervals hold within that hour."""
    out: dict[str, dict[datetime, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for (model, fraction, lo, hi), count in intervals.items():
        hour = floor_hour(lo)
        while hour < hi:
            part = hours_between(max(lo, hour), min(hi, hour + HOUR))
            out[model][hour] += part * count * fraction.numerator / fraction.denominator
            hour += HOUR
    return out


@dataclass(frozen=True, slots=True)
class Claim:
    """What one holder (a job, and the MIG profile its GPUs are) claims of one hour of a model's GPUs, in
    GPU-hours: on confirmed GPUs its samples show (a GPU seen with n jobs: 1/n each), on GPUs not confirmed, and
    by its declared count beyond the GPUs seen."""

    key: Hashable
    sampled: Decimal = ZERO
    unconfirmed: Decimal = ZERO
    declared: Decimal = ZERO
    overshared: Decimal = ZERO  # declared shares of a GPU beyond what it holds (scaled down pro rata): never billed

    @property
    def total(self) -> Decimal:
        return self.sampled + self.unconfirmed + self.declared + self.overshared


def allocate(capacity: Decimal, free: Decimal, claims: Sequence[Claim]) -> dict[Hashable, Decimal]:
    """The GPU-hours billed to each claim in an hour of `capacity` GPU-hours, of which samples show `free` held by
    no job: sampled GPUs first (scaled down only if they alone pass capacity), then declared counts in what is left,
    pro rata. Their sum never passes `capacity`; a claim within what is left is billed in full."""
    sampled = sum((c.sampled for c in claims), ZERO)
    declared = sum((c.declared for c in claims), ZERO)
    keep = min(ONE, capacity / sampled) if sampled > capacity else ONE
    room = max(capacity - sampled * keep - free, ZERO)
    fill = min(ONE, room / declared) if declared > room else ONE
    return {c.key: c.sampled * keep + c.declared * fill for c in claims}


@dataclass(frozen=True, slots=True)
class Holder:
    """A job as allocation sees it: declared `gpus` (None: only its samples know) of `model` and `profile`, held
    from `start` to `end` (None: unknown, or still running)."""

    pk: int
    gpus: Decimal | int | None
    model: str
    profile: str
    start: datetime | None
    end: datetime | None
    runs: tuple[Span, ...] | None = None  # when it held them where it ran more than once (a requeued job)


@dataclass(frozen=True, slots=True)
class Seen:
    """One job's rollup on one GPU in one hour."""

    job: int
    gpu: int
    hour: datetime
    model: str
    profile: str
    unconfirmed: bool
    weight: Decimal = ONE  # seen_weight: its part of the GPU-hour where other jobs were seen on the GPU too


def window(h: Holder, hour: datetime, first: datetime, last: datetime) -> tuple[datetime, datetime] | None:
    """The part of `hour` within the day (first..last) the job held its GPUs; a job of unknown times, the hour."""
    lo, hi = max(hour, h.start or hour, first), min(hour + HOUR, h.end or last, last)
    if h.runs is not None:
        # Between two runs it held nothing: the hour's held time is priced as one stretch from its first moment held
        # (the rate in force in that hour).
        stretches = held_within(h.runs, lo, hi)
        if not stretches:
            return None
        lo = stretches[0][0]
        hi = lo + sum((b - a for a, b in stretches), timedelta())
    return (lo, hi) if hi > lo else None


def seen_weight(samples: int, allocated: int | None) -> Decimal:
    """A job's weight on a GPU-hour it was seen on: its samples over every job's samples on the GPU then (the GPU's
    rollup counts them as allocated); 1 alone."""
    if not allocated or samples >= allocated:
        return ONE
    return Decimal(samples) / allocated


def seen_part(part: Decimal, whole: Decimal, weight: Decimal) -> Decimal:
    """The hours a job holds of a GPU-hour it was seen on: the part of the hour it held its GPUs (`part`), at most
    its weight of the hour as far as it is priced (`whole`)."""
    return part if weight >= ONE else min(part, whole * weight)


def _declares(h: Holder) -> bool:
    return bool(h.gpus) and h.start is not None


def _per_gpu(
    model: str, whole: Decimal, parts: dict[int, Decimal], holders: dict[int, Holder], rows: Sequence[Seen]
) -> tuple[dict[tuple[int, int], tuple[Decimal, Decimal]], dict[tuple[int, int], Decimal]]:
    """How each GPU of the hour is shared among the jobs seen on it: a job that declares its GPUs (or its share of
    one) claims its part of the hour x its share, scaled down pro rata where the claims on the GPU pass it; the jobs
    of unknown share split what those leave by the time each was seen (alone: the part of the hour it was seen
    for). (gpu, job) -> the fractions of the job's part of the hour it asked for and holds, for declared jobs;
    -> GPU-hours, for the others."""
    confirmed: dict[int, int] = defaultdict(int)
    for s in rows:
        if not s.unconfirmed and _declares(holders[s.job]):
            confirmed[s.job] += 1
    on_gpu: dict[int, list[Seen]] = defaultdict(list)
    for s in rows:
        on_gpu[s.gpu].append(s)
    declared_part: dict[tuple[int, int], tuple[Decimal, Decimal]] = {}
    unknown_hours: dict[tuple[int, int], Decimal] = {}
    for gpu, seen in on_gpu.items():
        asked: dict[int, Decimal] = {}
        for s in seen:
            h = holders[s.job]
            if _declares(h) and not s.unconfirmed and h.model == model:
                asked[s.job] = min(ONE, Decimal(cast(Decimal, h.gpus)) / confirmed[s.job])
        claimed = sum((parts[j] * a for j, a in asked.items()), ZERO)
        scale = min(ONE, whole / claimed) if claimed > whole else ONE
        for j, a in asked.items():
            declared_part[(gpu, j)] = (a, a * scale)
        unknown = [s for s in seen if not _declares(holders[s.job])]
        if not unknown:
            continue
        left = max(whole - claimed * scale, ZERO)
        weights = sum((s.weight for s in unknown), ZERO)
        for s in unknown:
            mine = s.weight / weights if weights else ONE / len(unknown)
            unknown_hours[(gpu, s.job)] = min(parts[s.job], left * mine)
    return declared_part, unknown_hours


def hour_claims(
    hour: datetime,
    model: str,
    first: datetime,
    last: datetime,
    holders: Sequence[Holder],
    seen: dict[tuple[int, datetime, str], list[Seen]],
) -> list[tuple[Claim, tuple[datetime, datetime]]]:
    """Each holder's claim on the hour's GPUs of `model`, keyed (job, profile), with the stretch it held them."""
    out = []
    whole = hours_between(max(hour, first), min(hour + HOUR, last))
    spans = {h.pk: span for h in holders if (span := window(h, hour, first, last)) is not None}
    parts = {pk: hours_between(*span) for pk, span in spans.items()}
    by_pk = {h.pk: h for h in holders}
    rows = [s for h in holders if h.pk in spans for s in seen.get((h.pk, hour, model), [])]
    declared_part, unknown_hours = _per_gpu(model, whole, parts, by_pk, rows)
    for h in holders:
        if h.pk not in spans:
            continue
        span, part = spans[h.pk], parts[h.pk]
        mine = seen.get((h.pk, hour, model), [])
        if _declares(h):  # its count (or share), on its own model
            if h.model != model:
                continue
            share = mig_share(h.model, h.profile)
            confirmed = [s for s in mine if not s.unconfirmed]
            sampled = sum((part * declared_part[(s.gpu, h.pk)][1] * share for s in confirmed), ZERO)
            asked = sum((part * declared_part[(s.gpu, h.pk)][0] * share for s in confirmed), ZERO)
            declared = max(Decimal(cast(Decimal, h.gpus)) - len(confirmed), ZERO) * part * share
            # A share of one GPU its co-tenants' shares leave no room for is an over-claim; jobs declaring whole GPUs
            # seen on the same GPUs share them, as jobs seen on one GPU do.
            over = asked - sampled if h.gpus is not None and h.gpus < 1 else ZERO
            out.append((Claim((h.pk, h.profile), sampled, declared=declared, overshared=over), span))
            continue
        by_profile: dict[str, list[Decimal]] = defaultdict(lambda: [ZERO, ZERO])
        for s in mine:
            by_profile[s.profile][1 if s.unconfirmed else 0] += unknown_hours[(s.gpu, h.pk)] * mig_share(
                model, s.profile
            )
        for profile, (sampled, unconfirmed) in sorted(by_profile.items()):
            out.append((Claim((h.pk, profile), sampled=sampled, unconfirmed=unconfirmed), span))
    return out


@dataclass
class Held:
    """What allocation gave one holder over a day on one model: GPU-hours claimed and billed, and the stretches
    billed with the GPU-hours of each (to price at the rates in force)."""

    claimed: Decimal = ZERO
    billed: Decimal = ZERO
    stretches: list[tuple[datetime, datetime, Decimal]] = field(default_factory=list)


def edge_part(claimed: Decimal, lo: datetime, hi: datetime, hour: datetime, gap: Decimal) -> Decimal:
    """What of a claim held from lo to hi within `hour` may lie in time samples `gap` hours apart showed free: at
    most one interval per GPU where it began within the hour (taken just after a sample), all of it where it held
    the hour no longer than an interval (between two samples). A claim that held the whole hour has none."""
    part = hours_between(lo, hi)
    if not part or not claimed:
        return ZERO
    if part <= gap:
        return claimed
    return claimed * gap / part if lo > hour else ZERO


def vouched_free(free: Decimal, blind: Decimal, gap: Decimal, hour: datetime,
                 claims: Sequence[tuple[Claim, tuple[datetime, datetime]]]) -> Decimal:  # fmt: skip
    """The free GPU-hours samples vouch for against these claims. A GPU seen free at a sample may have been taken
    right after it: the claims' edges (edge_part) may use up to one interval of each GPU seen free (`blind`); a
    claim on GPUs no sample saw that held longer than an interval from the hour's start would have been sampled."""
    edges = sum((edge_part(c.sampled + c.declared, lo, hi, hour, gap) for c, (lo, hi) in claims), ZERO)
    return max(free - min(blind, edges), ZERO)


def day_allocation(
    first: datetime, last: datetime, holders: Sequence[Holder], seen: Sequence[Seen],
    capacity: dict[str, dict[datetime, Decimal]], free: dict[tuple[str, datetime], Decimal],
    blind: dict[tuple[str, datetime], tuple[Decimal, Decimal]] | None = None,
) -> dict[tuple[int, str, str], Held]:  # fmt: skip
    """(job, model, profile) -> what it claimed and was billed over the day's hours up to `last`. `blind`: per model
    and hour, (the free GPU-hours samples cannot vouch for, the time between samples) -- see vouched_free."""
    by_job: dict[tuple[int, datetime, str], list[Seen]] = defaultdict(list)
    models = set(capacity) | {h.model for h in holders if h.gpus}
    for s in seen:
        by_job[(s.job, s.hour, s.model)].append(s)
        models.add(s.model)
    out: dict[tuple[int, str, str], Held] = defaultdict(Held)
    hour = first
    while hour < last:
        for model in sorted(models):
            claims = hour_claims(hour, model, first, last, holders, by_job)
            if not claims:
                continue
            unsure, gap = (blind or {}).get((model, hour), (ZERO, ZERO))
            vouched = vouched_free(free.get((model, hour), ZERO), unsure, gap, hour, claims)
            billed = allocate(capacity.get(model, {}).get(hour, ZERO), vouched, [c for c, _ in claims])
            for claim, (lo, hi) in claims:
                job, profile = cast(tuple[int, str], claim.key)
                held = out[(job, model, profile)]
                held.claimed += claim.total
                held.billed += billed[claim.key]
                if billed[claim.key] > 0:
                    held.stretches.append((lo, hi, billed[claim.key]))
        hour += HOUR
    return out
