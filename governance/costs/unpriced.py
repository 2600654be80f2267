"""No GPU-hour is silently free: usage of a GPU model no rate card prices (nor a '*' card) is "unpriced". It is
billed 0 in the ledger, and named by reconcile, the finance pages and the unattributed worklist; a month with
unpriced hours closes only once a card exists, or when finance accepts it on record (MonthClose.unpriced_accepted
and the audit log)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Sum

from governance.costs.models import Charge, MonthClose
from governance.costs.terms import TermsByMonth
from governance.lib.money import to_cents
from governance.lib.months import Month

UNPRICED = (
    "{cluster}: {hours} GPU-hours of {model} have no rate card (unpriced, billed 0); add a rate card for the model"
    " (or a '*' card), or accept it when closing the month"
)
CLOSE_REFUSED = (
    "{month} cannot close: it has usage no rate card prices ({found}). Add a rate card for each model (or a '*'"
    " card) and close again, or close with accept_unpriced to accept it on record."
)


@dataclass(frozen=True)
class Unpriced:
    cluster: str
    gpu_model: str
    gpu_hours: Decimal

    def __str__(self) -> str:
        return f"{self.cluster} {self.gpu_model or '(unknown model)'} {to_cents(self.gpu_hours)} GPU-hours"

    def as_record(self) -> dict[str, str]:
        return {"cluster": self.cluster, "gpu_model": self.gpu_model, "gpu_hours": str(to_cents(self.gpu_hours))}


def unpriced_usage(*, month: Month, terms: TermsByMonth | None = None) -> list[Unpriced]:
    """Per cluster and GPU model, the month's GPU-hours used on models its terms price with no card at all."""
    rows = (
        Charge.objects.filter(month=month.start.date(), kind=Charge.Kind.USAGE, at_default_rate=True, gpu_hours__gt=0)
        .values("cluster_name", "gpu_model")
        .annotate(hours=Sum("gpu_hours"))
        .order_by("cluster_name", "gpu_model")
    )
    found = list(rows)
    if not found:
        return []
    book = (terms or TermsByMonth()).of(month).book
    return [
        Unpriced(r["cluster_name"], r["gpu_model"], r["hours"])
        for r in found
        if not book.pricing(r["cluster_name"], r["gpu_model"]).rates
    ]


def unpriced_problems(*, month: Month, close: MonthClose | None) -> list[str]:
    """Reconcile's words for the unpriced usage of a month, less what finance accepted when it closed."""
    accepted = {(a["cluster"], a["gpu_model"]) for a in close.unpriced_accepted} if close is not None else set()
    return [
        UNPRICED.format(cluster=u.cluster, hours=to_cents(u.gpu_hours), model=u.gpu_model or "(unknown model)")
        for u in unpriced_usage(month=month)
        if (u.cluster, u.gpu_model) not in accepted
    ]
