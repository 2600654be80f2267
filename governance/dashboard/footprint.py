"""The energy, carbon and showback panel of the team and overview pages: one selector call, summed."""

from __future__ import annotations

from governance.costs.footprint import footprint_by_team
from governance.costs.models import GridIntensity
from governance.costs.selectors import ZERO
from governance.lib.months import Month


def footprint_panel(*, month: Month, team_ids: list[int] | None) -> dict | None:
    rows = footprint_by_team(month=month, team_ids=team_ids)
    if not rows:
        return None
    return {
        "energy_kwh": sum((r.energy_kwh for r in rows), ZERO),
        "carbon_kg": sum((r.carbon_kg for r in rows), ZERO),
        "showback_cost": sum((r.showback_cost for r in rows), ZERO),
        "currency": rows[0].currency,
        # Carbon is kWh x the grid's intensity: with no intensity set anywhere it is unknown, not zero.
        "carbon_known": GridIntensity.objects.exists(),
    }
