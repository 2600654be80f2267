"""The terms a month is priced under: rate cards, declared capacity, unallocated policies, billing modes, grid
intensity and commitments.

An open month is priced under the terms as they stand; a closed month under the snapshot taken when it
closed (MonthClose.terms), so nothing that changes afterwards re-prices it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings

from governance.costs.models import (
    DEFAULT_MODEL,
    BillingModeTerm,
    Commitment,
    DeclaredCapacity,
    GridIntensity,
    MonthClose,
    RateCard,
    UnallocatedPolicyTerm,
)
from governance.costs.pricing import Card, Rate, RateBook, gpu_hours
from governance.fleet.models import Cluster
from governance.lib.months import Month

MIXED_CURRENCIES = "Rate cards use more than one currency ({found}); a statement is in one currency."
SHOW, SHARE = Cluster.UnallocatedPolicy.SHOW.value, Cluster.UnallocatedPolicy.SHARE.value
BILLED = "billed"


class MixedCurrencies(ValueError):
    pass


HUNDRED = Decimal(100)


@dataclass(frozen=True, slots=True)
class CommitmentTerm:
    """A commitment as plain data (live, or from a closed month's snapshot); governance/costs/commitments.py
    applies it."""

    pk: int
    name: str
    team_id: int
    team: str
    cluster: str
    gpu_model: str
    gpus: int
    price: Decimal
    discount_percent: Decimal
    start: datetime
    end: datetime

    def contracted(self, list_cost: Decimal) -> Decimal:
        """The rate card's cost less the negotiated discount (FOCUS ContractedCost)."""
        return list_cost * (HUNDRED - self.discount_percent) / HUNDRED

    def in_force_on(self, cluster: str, day_first: datetime) -> bool:
        """Whether it covers some part of the day starting at `day_first` on this cluster."""
        return self.cluster == cluster and self.start < day_first + timedelta(days=1) and self.end > day_first

    def committed_hours(self, lo: datetime, hi: datetime) -> Decimal:
        """Committed GPU-hours between lo and hi."""
        return gpu_hours(max(lo, self.start), min(hi, self.end), self.gpus)

    def snapshot(self) -> list:
        return [self.pk, self.name, self.team_id, self.team, self.cluster, self.gpu_model, self.gpus, str(self.price),
                str(self.discount_percent), self.start.isoformat(), self.end.isoformat()]  # fmt: skip

    @classmethod
    def from_snapshot(cls, data: list) -> CommitmentTerm:
        pk, name, team_id, team, cluster, model, gpus, price, discount, start, end = data
        return cls(pk, name, team_id, team, cluster, model, int(gpus), Decimal(price), Decimal(discount),
                   datetime.fromisoformat(start), datetime.fromisoformat(end))  # fmt: skip


@dataclass
class Terms:
    """Everything pricing reads besides usage: plain data, the same for live terms and a frozen snapshot."""

    cards: list[Card]
    # (cluster, model) -> [(valid_from, count)] by valid_from
    declared: dict[tuple[str, str], list[tuple[datetime, int]]]
    # cluster -> [(valid_from, policy)] by valid_from
    policies: dict[str, list[tuple[datetime, str]]]
    # cluster -> [(valid_from, "billed" | "showback")] by valid_from
    modes: dict[str, list[tuple[datetime, str]]] = field(default_factory=dict)
    # cluster -> [(valid_from, kg CO2e per kWh)] by valid_from
    intensities: dict[str, list[tuple[datetime, Decimal]]] = field(default_factory=dict)
    commitments: list[CommitmentTerm] = field(default_factory=list)
    book: RateBook = field(init=False)

    def __post_init__(self) -> None:
        self.book = RateBook(self.cards, default_model=DEFAULT_MODEL)

    @property
    def currency(self) -> str:
        found = self.book.currencies()
        if len(found) > 1:
            raise MixedCurrencies(MIXED_CURRENCIES.format(found=", ".join(sorted(found))))
        return found.pop() if found else settings.GOVERNANCE_DEFAULT_CURRENCY

    def declares(self, cluster: str, before: datetime) -> bool:
        """Whether the cluster declares its capacity (any declaration in force before `before`)."""
        return any(c == cluster and steps[0][0] < before for (c, _), steps in self.declared.items())

    def policy(self, cluster: str, day_end: datetime) -> str:
        """The policy in force at the end of a day: a term dated within the day bills the whole day."""
        current = SHOW
        for valid_from, policy in self.policies.get(cluster, []):
            if valid_from < day_end:
                current = policy
        return current

    def billed(self, cluster: str, day_end: datetime) -> bool:
        """Whether the day is billed (chargeback) or only shown (showback), by the term in force at its end."""
        return _in_force(self.modes.get(cluster, []), day_end, BILLED) == BILLED

    def intensity(self, cluster: str, day_end: datetime) -> Decimal:
        """kg CO2e per kWh of the cluster's grid at the end of the day (0: no intensity known)."""
        return _in_force(self.intensities.get(cluster, []), day_end, Decimal(0))

    def snapshot(self) -> dict:
        def text(value: Decimal | None) -> str | None:
            return None if value is None else str(value)

        return {
            "rates": [
                [
                    c.gpu_model,
                    c.cluster,
                    c.rate.valid_from.isoformat(),
                    str(c.rate.price_per_gpu_hour),
                    c.rate.currency,
                    text(c.energy_price_per_kwh),
                ]
                for c in self.cards
            ],
            "capacity": [
                [cluster, model, valid_from.isoformat(), count]
                for (cluster, model), steps in sorted(self.declared.items())
                for valid_from, count in steps
            ],
            "policies": [
                [cluster, valid_from.isoformat(), policy]
                for cluster, steps in sorted(self.policies.items())
                for valid_from, policy in steps
            ],
            "modes": [
                [cluster, valid_from.isoformat(), mode]
                for cluster, steps in sorted(self.modes.items())
                for valid_from, mode in steps
            ],
            "intensities": [
                [cluster, valid_from.isoformat(), str(value)]
                for cluster, steps in sorted(self.intensities.items())
                for valid_from, value in steps
            ],
            "commitments": [c.snapshot() for c in self.commitments],
        }

    @classmethod
    def from_snapshot(cls, data: dict) -> Terms:
        cards = [
            Card(model, cluster, Rate(datetime.fromisoformat(since), Decimal(price), currency),
                 None if energy is None else Decimal(energy))
            for model, cluster, since, price, currency, energy in data.get("rates", [])
        ]  # fmt: skip
        declared: dict[tuple[str, str], list[tuple[datetime, int]]] = defaultdict(list)
        for cluster, model, since, count in data.get("capacity", []):
            declared[(cluster, model)].append((datetime.fromisoformat(since), int(count)))
        policies: dict[str, list[tuple[datetime, str]]] = defaultdict(list)
        for cluster, since, policy in data.get("policies", []):
            policies[cluster].append((datetime.fromisoformat(since), policy))
        modes: dict[str, list[tuple[datetime, str]]] = defaultdict(list)
        for cluster, since, mode in data.get("modes", []):
            modes[cluster].append((datetime.fromisoformat(since), mode))
        intensities: dict[str, list[tuple[datetime, Decimal]]] = defaultdict(list)
        for cluster, since, value in data.get("intensities", []):
            intensities[cluster].append((datetime.fromisoformat(since), Decimal(value)))
        commitments = [CommitmentTerm.from_snapshot(c) for c in data.get("commitments", [])]
        return cls(cards=cards, declared=_sorted(declared), policies=_sorted(policies), modes=_sorted(modes),
                   intensities=_sorted(intensities), commitments=commitments)  # fmt: skip


def _sorted(steps: dict) -> dict:
    return {key: sorted(values) for key, values in steps.items()}


def _in_force(steps: list, day_end: datetime, default):
    current = default
    for valid_from, value in steps:
        if valid_from < day_end:
            current = value
    return current


def live_terms() -> Terms:
    """The terms as they stand now (three small queries)."""
    cards = [
        Card(c.gpu_model, c.cluster.name if c.cluster else None, Rate(c.valid_from, c.price_per_gpu_hour, c.currency),
             c.energy_price_per_kwh)
        for c in RateCard.objects.select_related("cluster").order_by("valid_from")
    ]  # fmt: skip
    declared: dict[tuple[str, str], list[tuple[datetime, int]]] = defaultdict(list)
    for cluster, model, since, count in DeclaredCapacity.objects.values_list(
        "cluster__name", "gpu_model", "valid_from", "count"
    ):
        declared[(cluster, model)].append((since, count))
    policies: dict[str, list[tuple[datetime, str]]] = defaultdict(list)
    for cluster, since, policy in UnallocatedPolicyTerm.objects.values_list("cluster__name", "valid_from", "policy"):
        policies[cluster].append((since, policy))
    modes: dict[str, list[tuple[datetime, str]]] = defaultdict(list)
    for cluster, since, mode in BillingModeTerm.objects.values_list("cluster__name", "valid_from", "mode"):
        modes[cluster].append((since, mode))
    intensities: dict[str, list[tuple[datetime, Decimal]]] = defaultdict(list)
    for cluster, since, value in GridIntensity.objects.values_list("cluster__name", "valid_from", "kg_co2e_per_kwh"):
        intensities[cluster].append((since, value))
    commitments = [
        CommitmentTerm(c.pk, c.name, c.team_id, c.team.name, c.cluster.name, c.gpu_model, c.gpus,
                       c.price_per_gpu_hour, c.contracted_discount_percent, c.start, c.end)
        for c in Commitment.objects.select_related("team", "cluster").order_by("start", "pk")
    ]  # fmt: skip
    return Terms(cards=cards, declared=_sorted(declared), policies=_sorted(policies), modes=_sorted(modes),
                 intensities=_sorted(intensities), commitments=commitments)  # fmt: skip


class TermsByMonth:
    """The terms of each month a pass touches: frozen for closed months, live for the rest (memoised)."""

    def __init__(self) -> None:
        self._closed = {Month(m.year, m.month): terms for m, terms in MonthClose.objects.values_list("month", "terms")}
        self._live: Terms | None = None
        self._frozen: dict[Month, Terms] = {}

    def closed(self, month: Month) -> bool:
        return month in self._closed

    @property
    def closed_months(self) -> set[Month]:
        return set(self._closed)

    def live(self) -> Terms:
        if self._live is None:
            self._live = live_terms()
        return self._live

    def of(self, month: Month) -> Terms:
        if month not in self._closed:
            return self.live()
        if month not in self._frozen:
            snapshot = self._closed[month]
            self._frozen[month] = Terms.from_snapshot(snapshot) if snapshot else self.live()
        return self._frozen[month]


def rate_book() -> RateBook:
    """The rate cards in force now, as a RateBook (for reads that name a rate beside the ledger's money)."""
    return live_terms().book
