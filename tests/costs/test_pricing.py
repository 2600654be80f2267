from decimal import Decimal

from governance.costs.pricing import Rate, gpu_hours, price_interval
from tests.factories import at

RATES = [
    Rate(at("2026-11-01T00:00:00Z"), Decimal("2.00"), "USD"),
    Rate(at("2026-11-15T00:00:00Z"), Decimal("3.00"), "USD"),
]


def test_gpu_hours_are_gpus_times_hours_held():
    assert gpu_hours(at("2026-11-03T09:00:00Z"), at("2026-11-03T10:30:00Z"), 8) == Decimal(12)


def test_each_stretch_is_priced_at_the_rate_in_force():
    priced = price_interval(at("2026-11-14T22:00:00Z"), at("2026-11-15T03:00:00Z"), 2, RATES)

    # 2 h at 2.00 and 3 h at 3.00, on two GPUs
    assert priced.gpu_hours == Decimal(10)
    assert priced.cost == Decimal(2) * 2 * Decimal("2.00") + Decimal(2) * 3 * Decimal("3.00")


def test_time_before_the_first_rate_uses_the_first_rate():
    priced = price_interval(at("2026-10-31T23:00:00Z"), at("2026-11-01T01:00:00Z"), 1, RATES)

    assert priced.cost == Decimal("4.00")


def test_no_rate_prices_nothing_but_still_counts_hours():
    priced = price_interval(at("2026-11-01T00:00:00Z"), at("2026-11-01T05:00:00Z"), 1, [])

    assert (priced.gpu_hours, priced.cost) == (Decimal(5), Decimal(0))


def test_an_empty_interval_costs_nothing():
    assert price_interval(at("2026-11-02T00:00:00Z"), at("2026-11-01T00:00:00Z"), 4, RATES).cost == 0
