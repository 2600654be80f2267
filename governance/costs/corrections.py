"""Corrections of a closed month: what its ledger rows (re-priced under its frozen terms) add up to now, less
what was frozen and what earlier corrections already billed, line by line, as adjustment rows of the next
open month. A zero difference writes no row; recomputing gives the same rows, so it is safe to repeat.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Max, Sum

from governance.costs.ledger import AMOUNTS, ZERO
from governance.costs.models import Charge, MonthClose, StatementLine
from governance.costs.summaries import ledger_days_refresh
from governance.fleet.models import Cluster
from governance.lib.months import Month

BILLED = [Charge.Kind.USAGE, Charge.Kind.UNALLOCATED, Charge.Kind.SHARED, Charge.Kind.UNUSED, Charge.Kind.PURCHASE]
KEY = ("cluster_name", "job_id", "team_id", "project_id", "gpu_model", "mig_profile", "commitment_id")
NAMES = ("job_ref", "user_name", "team_name", "project_name", "currency")
REASONS = {
    "usage": "late usage",
    "unallocated": "late usage on capacity billed as unallocated",
    "shared": "late usage changed the share of unallocated capacity",
    "unused": "late usage drew on a commitment left unused",
    "purchase": "the commitment's fee changed",
}


def closed_months() -> set[Month]:
    return {Month(d.year, d.month) for d in MonthClose.objects.values_list("month", flat=True)}


def landing_month(corrected: Month, closed: set[Month]) -> Month:
    """The first open month after a closed one: where its corrections are billed."""
    month = corrected.next()
    while month in closed:
        month = month.next()
    return month


def months_corrected_in(month: Month, closed: set[Month] | None = None) -> list[Month]:
    """The closed months whose corrections land in `month` (it being open)."""
    closed = closed_months() if closed is None else closed
    return sorted(m for m in closed if m < month and landing_month(m, closed) == month)


def _totals(rows: Iterable[dict], kind_field: str) -> dict[tuple, dict]:
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r[kind_field], *(r[k] for k in KEY))
        entry = out.setdefault(key, {**{a: ZERO for a in AMOUNTS}, **{n: r.get(n) or "" for n in NAMES}})
        for a in AMOUNTS:
            entry[a] += r[a] or ZERO
    return out


def _sums() -> dict:
    return {a: Sum(a) for a in AMOUNTS} | {n: Max(n) for n in NAMES}


def corrections_refresh(*, corrected: Month, now: datetime) -> int:
    """Rewrite the corrections of a closed month in its landing month; returns how many rows it holds now."""
    close = MonthClose.objects.select_for_update().get(month=corrected.start.date())
    landing = landing_month(corrected, closed_months())
    current = _totals(
        Charge.objects.filter(month=corrected.start.date(), kind__in=BILLED)
        .values("kind", *KEY)
        .annotate(**_sums())
        .order_by(),
        "kind",
    )
    billed = _totals(
        StatementLine.objects.filter(close=close, kind__in=BILLED).values("kind", *KEY).annotate(**_sums()).order_by(),
        "kind",
    )
    earlier = _totals(
        StatementLine.objects.filter(kind=StatementLine.Kind.ADJUSTMENT, corrects=corrected.start.date())
        .values("corrected_kind", *KEY)
        .annotate(**_sums())
        .order_by(),
        "corrected_kind",
    )
    clusters = dict(Cluster.objects.values_list("name", "pk"))
    from governance.costs.terms import live_terms  # terms import the ledger's models; corrections are read first

    landing_terms, first_day_end = live_terms(), landing.start + timedelta(days=1)
    rows = []
    for key in sorted(set(current) | set(billed) | set(earlier), key=str):
        now_amounts = current.get(key)
        was = [billed.get(key), earlier.get(key)]
        diff = {a: (now_amounts[a] if now_amounts else ZERO) - sum((w[a] for w in was if w), ZERO) for a in AMOUNTS}
        if not any(diff.values()):
            continue
        names = now_amounts or next(w for w in was if w)
        kind, cluster_name, job_id, team_id, project_id, gpu_model, mig_profile, commitment_id = key
        if cluster_name not in clusters:
            continue
        rows.append(Charge(
            kind=Charge.Kind.ADJUSTMENT, month=landing.start.date(), day=landing.start.date(),
            period_start=landing.start, period_end=landing.end, cluster_id=clusters[cluster_name],
            cluster_name=cluster_name, job_id=job_id, team_id=team_id, project_id=project_id, gpu_model=gpu_model,
            mig_profile=mig_profile, commitment_id=commitment_id, corrects=corrected.start.date(), corrected_kind=kind,
            reason=f"correction of {corrected}: {REASONS[kind]}", priced_at=now,
            billed=landing_terms.billed(cluster_name, first_day_end),
            **{n: names[n] for n in NAMES}, **{a: Decimal(diff[a]) for a in AMOUNTS},
        ))  # fmt: skip
    Charge.objects.filter(
        kind=Charge.Kind.ADJUSTMENT, corrects=corrected.start.date(), month=landing.start.date()
    ).delete()
    Charge.objects.bulk_create(rows, batch_size=2000)
    ledger_days_refresh((pk, landing.start.date()) for pk in clusters.values())
    return len(rows)
