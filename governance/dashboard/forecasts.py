"""The forecast panel of the team and overview pages: one selector call, one figure, one sentence."""

from __future__ import annotations

from decimal import Decimal
from functools import partial

from django.utils import timezone

from governance.costs.forecasts import SpendForecast, last_whole_day, spend_forecast
from governance.costs.services import AlertSent, forecast_alert_text
from governance.dashboard.figures.forecast import forecast_figure
from governance.lib import format as fmt
from governance.lib.months import Month


def forecast_panel(
    *, month: Month, team_ids: list[int] | None, title: str, name: str, budget: Decimal | None = None,
    currency: str | None = None,
) -> dict | None:  # fmt: skip
    """{"f": SpendForecast, "figure": dict, "warning": str} for the teams' month (None: nothing spent)."""
    forecasts = spend_forecast(month=month, as_of=last_whole_day(month, timezone.now()), keys=team_ids,
                               combined=name)  # fmt: skip
    if not forecasts or not forecasts[0].actual:
        return None
    f = forecasts[0]
    figure = forecast_figure(title=title, actual=f.actual, path=f.path, currency=f.currency, budget=budget)
    warning = ""
    if budget is not None and f.spent < budget < f.forecast:
        note = AlertSent(name, 100, f.forecast, budget, currency or f.currency, "forecast", f.crosses(budget))
        warning = forecast_alert_text(note)
    return {"f": f, "figure": figure, "warning": warning, "words": forecast_words(f)}


def forecast_words(f: SpendForecast) -> dict[str, str]:
    """The forecast as a sentence: every amount through lib/format.py, the 80% interval said in words."""
    money = partial(fmt.money, currency=f.currency)
    return {
        "forecast": money(f.forecast),
        "spent": money(f.spent),
        "as_of": f"{f.as_of:%Y-%m-%d}",
        "interval": f"80% likely to end between {money(f.low)} and {money(f.high)}",
    }
