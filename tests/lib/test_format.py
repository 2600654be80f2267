from decimal import Decimal

from governance.lib import format as fmt


def test_money_has_thousands_separators_cents_and_its_currency():
    assert fmt.money(Decimal("13980.855"), "USD") == "13,980.86 USD"
    assert fmt.money(Decimal("13980.865"), "USD") == "13,980.86 USD"  # half-even, once, on output
    assert fmt.money(3647.875, "EUR") == "3,647.88 EUR"
    assert fmt.money(None, "USD") == "n/a"


def test_hours_and_shares_read_the_same_on_every_page():
    assert fmt.hours(Decimal("1234.56")) == "1,234.6"
    assert fmt.pct(Decimal("0.1234")) == "12.3%"
    assert fmt.pct(None) == "n/a" and fmt.hours(None) == "n/a"
