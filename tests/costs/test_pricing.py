from decimal import Decimal

from governance.costs.pricing import Rate, gpu_hours, price_interval, rate_at
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


def test_a_mig_profile_is_priced_by_its_share_of_the_compute_slices():
    from fractions import Fraction

    from governance.costs.pricing import mig_fraction

    assert mig_fraction("NVIDIA A100-SXM4-80GB", "1g.10gb") == Fraction(1, 7)
    assert mig_fraction("NVIDIA H100 80GB HBM3", "3g.40gb") == Fraction(3, 7)
    assert mig_fraction("NVIDIA A30", "2g.12gb") == Fraction(1, 2)
    assert mig_fraction("NVIDIA H100 80GB HBM3", "") == 1


def test_the_rate_book_falls_back_to_the_cluster_default_then_the_global_default():
    from governance.costs.pricing import Card, RateBook

    book = RateBook([
        Card("H100", None, Rate(at("2026-01-01T00:00:00Z"), Decimal("2.00"), "USD")),
        Card("*", "c1", Rate(at("2026-01-01T00:00:00Z"), Decimal("1.10"), "USD")),
        Card("*", None, Rate(at("2026-01-01T00:00:00Z"), Decimal("0.90"), "USD")),
    ])  # fmt: skip

    assert (book.pricing("c1", "H100").rates[0].price_per_gpu_hour, book.pricing("c1", "H100").at_default) == (
        Decimal("2.00"), False)  # fmt: skip
    assert book.pricing("c1", "A40").rates[0].price_per_gpu_hour == Decimal("1.10")
    assert book.pricing("c2", "A40").rates[0].price_per_gpu_hour == Decimal("0.90")
    assert book.pricing("c2", "A40").at_default


def test_the_rate_at_a_moment_is_the_one_in_force_then():
    assert rate_at(RATES, at("2026-11-20T00:00:00Z")).price_per_gpu_hour == Decimal("3.00")
    assert rate_at(RATES, at("2026-11-15T00:00:00Z")).price_per_gpu_hour == Decimal("3.00")
    assert rate_at(RATES, at("2026-11-14T23:59:59Z")).price_per_gpu_hour == Decimal("2.00")


def test_before_the_first_rate_the_first_rate_applies_and_no_rates_give_none():
    assert rate_at(RATES, at("2026-10-01T00:00:00Z")) == RATES[0]
    assert rate_at([], at("2026-10-01T00:00:00Z")) is None
