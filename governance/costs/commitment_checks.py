"""Reads that check commitments: per commitment and month, the fee billed by its purchase rows equals the
effective cost of what its usage rows drew from it plus its unused rows, to the cent (reconcile runs it)."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from django.db.models import F, Sum

from governance.costs.models import Charge
from governance.lib.money import to_cents
from governance.lib.months import Month

COMMITMENT_OFF = (
    "commitment {commitment} ({team}, {cluster}): purchases billed {billed} {currency} but usage drawn + unused"
    " = {effective} {currency} (off by {off})"
)


def commitments_check(*, month: Month, currency: str) -> list[str]:
    """The commitments whose month does not add up: purchase BilledCost = covered EffectiveCost + unused."""
    rows = Charge.objects.filter(month=month.start.date(), commitment_id__isnull=False).exclude(kind="adjustment")
    sums = (
        rows.values("commitment_id", "kind", "team_name", "cluster_name")
        .annotate(billed=Sum("billed_cost"), drawn=Sum(F("cost") - F("billed_cost")), cost=Sum("cost"))
        .order_by()
    )
    billed: dict[int, Decimal] = defaultdict(Decimal)
    effective: dict[int, Decimal] = defaultdict(Decimal)
    names: dict[int, tuple[str, str]] = {}
    for r in sums:
        pk = r["commitment_id"]
        if r["kind"] == Charge.Kind.PURCHASE:
            billed[pk] += r["billed"]
            names[pk] = (r["team_name"], r["cluster_name"])
        elif r["kind"] == Charge.Kind.UNUSED:
            effective[pk] += r["cost"]
        else:
            effective[pk] += r["drawn"]
    problems = []
    for pk in sorted(set(billed) | set(effective)):
        off = to_cents(billed[pk]) - to_cents(effective[pk])
        if off:
            team, cluster = names.get(pk, ("?", "?"))
            problems.append(COMMITMENT_OFF.format(commitment=pk, team=team, cluster=cluster, currency=currency,
                                                  billed=to_cents(billed[pk]), effective=to_cents(effective[pk]),
                                                  off=off))  # fmt: skip
    return problems
