"""A team's budget in words for the team page and the overview: none set, on track, near, forecast to exceed (by
when), exceeded; with the colour that says under (green), near (amber) or over (red)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from governance.costs.budget_alerts import DEFAULT_THRESHOLDS
from governance.costs.forecasts import SpendForecast, last_whole_day, spend_forecast
from governance.costs.models import Budget, BudgetRequest
from governance.lib import format as fmt
from governance.lib.months import Month
from governance.org.models import Team

WHO_SETS = "The team's lead sets it through the API (POST /api/v1/budgets/); finance and admins also in the admin."


@dataclass(frozen=True)
class BudgetState:
    state: str  # none, on_track, near, forecast_over, over
    colour: str  # grey, green, amber, red
    headline: str
    detail: str
    spent_share: float | None = None


def near_share(budget: Budget) -> Decimal:
    """Near means past the highest alert threshold under 100% (80% by default)."""
    under = [t for t in (budget.thresholds or DEFAULT_THRESHOLDS) if t < 100]
    return Decimal(max(under or [80])) / 100


def budget_state(*, budget: Budget | None, spent: Decimal, forecast: SpendForecast | None, month_over: bool,
                 request: BudgetRequest | None = None) -> BudgetState:  # fmt: skip
    if budget is None:
        asked = (f" {request.requested_by_name} asked finance for one on {request.requested_at:%Y-%m-%d}."
                 if request else "")  # fmt: skip
        return BudgetState("none", "grey", "No budget set", WHO_SETS + asked)
    amount, currency = budget.amount, budget.currency
    share = float(spent / amount)
    of = f"{fmt.money(spent, currency)} spent of {fmt.money(amount, currency)} ({fmt.pct(share)})"
    if spent > amount:
        return BudgetState("over", "red", "Over budget",
                           f"{of}: {fmt.money(spent - amount, currency)} over.", share)  # fmt: skip
    if forecast is not None and not month_over and forecast.forecast > amount:
        crosses = forecast.crosses(amount)
        when = f" by about {_day(crosses)}" if crosses else " by the month's end"
        return BudgetState("forecast_over", "amber", f"Forecast to exceed the budget{when}",
                           f"{of}; the month-end forecast is {fmt.money(forecast.forecast, forecast.currency)}.",
                           share)  # fmt: skip
    if spent >= amount * near_share(budget):
        return BudgetState("near", "amber", "Near the budget", f"{of}.", share)
    ahead = (
        ""
        if forecast is None or month_over
        else (f"; the month-end forecast is {fmt.money(forecast.forecast, forecast.currency)}")
    )
    return BudgetState("on_track", "green", "Under budget" if month_over else "On track", f"{of}{ahead}.", share)


def _day(day: date) -> str:
    n = day.day
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"the {n}{suffix} ({day:%Y-%m-%d})"


@dataclass(frozen=True)
class TeamBudget:
    team: str
    slug: str
    state: BudgetState


SEVERITY = {"over": 0, "forecast_over": 1, "near": 2, "none": 3, "on_track": 4}
OVERVIEW_TEAMS = 12


def team_budget_states(*, month: Month, spent: dict[int, Decimal], now: datetime) -> list[TeamBudget]:
    """The budgets of the teams an overview shows (`spent`: team id -> the month's printed cost), most urgent
    first, at most OVERVIEW_TEAMS of them."""
    ids = list(spent)
    if not ids:
        return []
    first = month.start.date()
    budgets = {b.team_id: b for b in Budget.objects.filter(month=first, team_id__in=ids)}
    asked = {r.team_id: r for r in BudgetRequest.objects.filter(month=first, team_id__in=ids)}
    month_over = month.end <= now
    forecasts = (
        {}
        if month_over or not budgets
        else {f.key: f for f in spend_forecast(month=month, as_of=last_whole_day(month, now), keys=list(budgets))}
    )
    teams = Team.objects.filter(pk__in=ids).values_list("pk", "name", "slug")
    rows = [TeamBudget(name, slug, budget_state(budget=budgets.get(pk), spent=spent[pk], forecast=forecasts.get(pk),
                                                month_over=month_over, request=asked.get(pk)))
            for pk, name, slug in teams]  # fmt: skip
    return sorted(rows, key=lambda r: (SEVERITY[r.state.state], r.team))[:OVERVIEW_TEAMS]
