from datetime import date, timedelta

import pytest

from governance.lib.forecast import NAIVE, RECENT, WEEKDAY, month_forecast, weekday_factors

NOV = date(2026, 11, 1)  # a Sunday


def days(first: date, values: list[float]) -> dict[date, float]:
    return {first + timedelta(days=i): v for i, v in enumerate(values)}


def test_the_naive_forecast_is_the_run_rate_times_the_days_of_the_month():
    f = month_forecast(days(NOV, [100, 200, 300]), first=NOV, as_of=date(2026, 11, 3), method=NAIVE)

    assert f.spent == 600 and f.forecast == pytest.approx(200 * 30)


def test_the_recent_forecast_runs_on_the_last_week_when_the_level_moved():
    f = month_forecast(days(NOV, [0] * 7 + [100] * 7), first=NOV, as_of=date(2026, 11, 14), method=RECENT)

    assert f.forecast == pytest.approx(700 + 16 * 100)


def test_weekday_factors_lift_weekdays_over_weekends():
    history = days(date(2026, 10, 5), [10, 10, 10, 10, 10, 0, 0] * 4)  # Mondays first

    factors = weekday_factors(history)

    assert factors[0] > 1 > factors[5] and factors[5] == factors[6]


def test_a_weekday_forecast_expects_less_on_the_remaining_weekends():
    history = days(date(2026, 10, 5), [10, 10, 10, 10, 10, 0, 0] * 4)
    month = {**history, **days(NOV, [0, 10, 10, 10, 10, 10, 0])}

    weekday = month_forecast(month, first=NOV, as_of=date(2026, 11, 7), method=WEEKDAY)
    naive = month_forecast(month, first=NOV, as_of=date(2026, 11, 7), method=NAIVE)

    assert weekday.forecast < naive.forecast


def test_the_interval_holds_the_forecast_and_widens_with_noise():
    steady = month_forecast(days(NOV, [100] * 10), first=NOV, as_of=date(2026, 11, 10))
    noisy = month_forecast(days(NOV, [80, 120] * 5), first=NOV, as_of=date(2026, 11, 10))

    assert steady.low == steady.forecast == steady.high
    assert noisy.low < noisy.forecast < noisy.high


def test_an_ended_month_forecasts_what_it_spent_and_crossing_names_the_day():
    f = month_forecast(days(NOV, [10] * 30), first=NOV, as_of=date(2026, 11, 30))
    partial = month_forecast(days(NOV, [10] * 5), first=NOV, as_of=date(2026, 11, 5), method=NAIVE)

    assert (f.forecast, f.low, f.high) == (300, 300, 300)
    assert partial.crosses(100) == date(2026, 11, 10) and partial.crosses(1000) is None


def test_nothing_spent_forecasts_nothing():
    f = month_forecast({}, first=NOV, as_of=date(2026, 11, 5))

    assert (f.spent, f.forecast, f.low, f.high) == (0, 0, 0, 0)
