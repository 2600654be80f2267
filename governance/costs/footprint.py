"""A month's footprint beside its bill: energy, carbon and the showback cost per team (read from the ledger)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Q, Sum

from governance.costs.ledger import ZERO
from governance.costs.selectors import _currency, month_sums
from governance.lib.months import Month


@dataclass(frozen=True)
class Footprint:
    """A team's (or every visible team's) month beside its bill: energy, carbon, and the cost shown, not billed."""

    team_id: int | None
    team: str
    energy_kwh: Decimal
    carbon_kg: Decimal
    showback_cost: Decimal
    currency: str


def footprint_by_team(*, month: Month, team_ids: Iterable[int | None] | None = None) -> list[Footprint]:
    """Per team: kWh, kg CO2e and the showback cost (statements carry it, nobody is billed for it)."""
    rows = month_sums(month, team_ids)
    currency = _currency(rows)
    totals = (
        rows.values("team_id", "team_name")
        .annotate(kwh=Sum("energy_kwh"), carbon=Sum("carbon_kg"), showback=Sum("cost", filter=Q(billed=False)))
        .order_by("team_name", "team_id")
    )
    return [
        Footprint(r["team_id"], r["team_name"], r["kwh"] or ZERO, r["carbon"] or ZERO, r["showback"] or ZERO, currency)
        for r in totals
    ]
