"""The budget in words and colour (governance/dashboard/budgets.py): pure, no database."""

from datetime import date
from decimal import Decimal
from types import SimpleNamespace

from governance.costs.models import Budget
from governance.dashboard.budgets import WHO_SETS, budget_state


def _forecast(amount: str, crosses: date | None = None) -> SimpleNamespace:
    return SimpleNamespace(forecast=Decimal(amount), currency="USD", crosses=lambda _: crosses)


BUDGET = Budget(amount=Decimal("10000.00"), currency="USD", thresholds=[50, 80, 100])


def test_the_colours_mean_under_near_and_over():
    colours = [budget_state(budget=BUDGET, spent=Decimal(s), forecast=None, month_over=False).colour
               for s in ("1000", "8500", "10000.01")]  # fmt: skip

    assert colours == ["green", "amber", "red"]


def test_a_forecast_past_the_budget_says_by_when_in_amber():
    state = budget_state(budget=BUDGET, spent=Decimal("4000"), forecast=_forecast("12345.678", date(2026, 11, 24)),
                         month_over=False)  # fmt: skip

    assert (state.state, state.colour) == ("forecast_over", "amber")
    assert state.headline == "Forecast to exceed the budget by about the 24th (2026-11-24)"
    assert state.detail == "4,000.00 USD spent of 10,000.00 USD (40.0%); the month-end forecast is 12,345.68 USD."


def test_over_budget_says_by_how_much_and_no_budget_says_who_sets_one():
    over = budget_state(budget=BUDGET, spent=Decimal("22833.36"), forecast=None, month_over=True)
    none = budget_state(budget=None, spent=Decimal("5"), forecast=None, month_over=False)

    assert over.headline == "Over budget" and over.detail.endswith(": 12,833.36 USD over.")
    assert (none.state, none.colour, none.headline, none.detail) == ("none", "grey", "No budget set", WHO_SETS)
