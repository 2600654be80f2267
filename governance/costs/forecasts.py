"""Month-end forecasts of spend per team, project or cluster, from the ledger's daily sums (never re-priced here).

The daily series is one SQL aggregate over LedgerDay, the ledger summed per day (usage and shares; the unallocated
line under the cluster), for the month so far and HISTORY_DAYS before it; corrections that landed in the month are
known amounts, added as they are. The arithmetic is governance/lib/forecast.py.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Max, Sum

from governance.costs.models import LedgerDay
from governance.lib.forecast import NAIVE, RECENT, Forecast, month_days, month_forecast
from governance.lib.money import to_cents
from governance.lib.months import Month

HISTORY_DAYS = 56
GROUPS = {"team": ("team_id", "team_name"), "project": ("project_id", "project_name"), "cluster": ("cluster_id",
          "cluster_name")}  # fmt: skip
# From the backtest (tests/costs/test_forecast_backtest.py): the last week's run-rate beats the month's from day
# 10 on; before that they are the same or the month's is better. Day-of-week factors never beat the naive rate.
RECENT_FROM_DAY = 10


def method_for(cutoff_day: int) -> str:
    """The method the backtest chose for a forecast made at the end of day `cutoff_day` of the month."""
    return RECENT if cutoff_day >= RECENT_FROM_DAY else NAIVE


@dataclass(frozen=True)
class SpendForecast:
    """One team's (project's, cluster's) month: spent up to as_of, the month-end forecast and its 80% interval."""

    group: str
    key: int | None
    name: str
    month: Month
    as_of: date
    spent: Decimal
    forecast: Decimal
    low: Decimal
    high: Decimal
    currency: str
    method: str
    actual: list[tuple[date, Decimal]]  # cumulative spend per day up to as_of
    path: list[tuple[date, float, float, float]]  # (day, expected, low, high) cumulative from as_of on
    detail: Forecast

    def crosses(self, amount: Decimal) -> date | None:
        if self.spent >= amount:
            return None
        return self.detail.crosses(float(amount))


def _f(value: Decimal | None) -> float:
    return float(value or 0)


def last_whole_day(month: Month, now: datetime) -> date:
    """What a page forecasts from: the charges up to the end of yesterday (today is not over)."""
    return min((now - timedelta(days=1)).date(), (month.end - timedelta(days=1)).date())


def spend_forecast(
    *, month: Month, as_of: date, group: str = "team", keys: Iterable[int | None] | None = None,
    combined: str | None = None, team_ids: Iterable[int] | None = None,
) -> list[SpendForecast]:  # fmt: skip
    """Forecasts of the month for every team (project, cluster) with spend in the month or its history window;
    `keys` keeps those ids (None: the rows without one). Charges dated after `as_of` are ignored. `combined`
    forecasts the sum of them all as one series of that name. `team_ids` keeps the rows of those teams only."""
    id_field, name_field = GROUPS[group]
    first = month.start.date()
    days = month_days(first)
    as_of = min(max(as_of, first - timedelta(days=1)), days[-1])
    # The ledger's per-day summary: its rows sum the ledger's by day, team, project and cluster.
    rows = LedgerDay.objects.filter(day__gte=first - timedelta(days=HISTORY_DAYS), day__lte=as_of)
    if group == "team":
        rows = rows.exclude(kind="unallocated")
    elif group == "project":
        rows = rows.filter(kind="usage")
    if team_ids is not None:
        rows = rows.filter(team_id__in=list(team_ids))
    if keys is not None:
        ids = list(keys)
        known = [i for i in ids if i is not None]
        filt = {f"{id_field}__in": known}
        rows = rows.filter(**filt) | rows.filter(**{f"{id_field}__isnull": True}) if None in ids else rows.filter(
            **filt)  # fmt: skip
    currency = rows.aggregate(c=Max("currency"))["c"] or settings.GOVERNANCE_DEFAULT_CURRENCY
    daily: dict[int | None, dict[date, float]] = defaultdict(dict)
    extra: dict[int | None, Decimal] = defaultdict(Decimal)
    names: dict[int | None, str] = {}
    sums = rows.values("kind", "month", "day", id_field, name_field).annotate(cost=Sum("cost")).order_by()
    for r in sums:
        key = None if combined else r[id_field]
        names.setdefault(key, combined or r[name_field])
        if r["kind"] == "adjustment":
            if r["month"] == first:
                extra[key] += r["cost"] or Decimal(0)
            continue
        daily[key][r["day"]] = daily[key].get(r["day"], 0.0) + _f(r["cost"])
    cutoff = (as_of - first).days + 1
    method = method_for(cutoff)
    out = []
    for key in sorted(set(daily) | set(extra), key=lambda k: (names.get(k) or "", k or 0)):
        series = daily.get(key, {})
        f = month_forecast(series, first=first, as_of=as_of, method=method)
        add = float(extra[key])
        running, actual = extra[key], []
        for day in days:
            if day > as_of:
                break
            running += Decimal(str(series.get(day, 0.0)))
            actual.append((day, to_cents(running)))
        out.append(SpendForecast(
            group=group, key=key, name=names.get(key) or "", month=month, as_of=as_of,
            spent=to_cents(Decimal(str(f.spent + add))), forecast=to_cents(Decimal(str(f.forecast + add))),
            low=to_cents(Decimal(str(f.low + add))), high=to_cents(Decimal(str(f.high + add))), currency=currency,
            method=f.method, actual=actual, path=[(d, e + add, lo + add, hi + add) for d, e, lo, hi in f.path],
            detail=Forecast(f.spent + add, f.forecast + add, f.low + add, f.high + add, f.method,
                            [(d, e + add, lo + add, hi + add) for d, e, lo, hi in f.path]),
        ))  # fmt: skip
    return out
