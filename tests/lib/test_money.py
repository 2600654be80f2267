from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from governance.lib.money import CENT, printed, to_cents

# Ledger amounts as the ledger stores them (ten places), credits (corrections) included.
amounts = st.lists(
    st.decimals(min_value=Decimal("-5000"), max_value=Decimal("50000"), places=10, allow_nan=False), max_size=40
)


def test_it_places_the_cent_the_rounding_moves_on_the_largest_remainder():
    # Each rounded alone: 0.00 + 0.00 + 0.01, printed under a total of 0.02.
    lines = [Decimal("0.006"), Decimal("0.007"), Decimal("0.0049")]

    assert printed(lines) == [Decimal("0.01"), Decimal("0.01"), Decimal("0.00")]
    assert sum(printed(lines)) == to_cents(sum(lines)) == Decimal("0.02")


def test_it_breaks_a_tie_on_the_earlier_line():
    assert printed([Decimal("0.005"), Decimal("0.005")]) == [Decimal("0.01"), Decimal("0.00")]
    assert printed([Decimal("1.125"), Decimal("2.125"), Decimal("3.125")]) == [
        Decimal("1.13"), Decimal("2.13"), Decimal("3.12"),
    ]  # fmt: skip


def test_the_statement_that_said_50747_95_under_rows_of_50747_94_now_prints_rows_that_add_up():
    # Three teams whose half-even roundings (0.00 each) lose the cent the month's total (0.01) keeps.
    rows = [Decimal("16915.984"), Decimal("16915.983"), Decimal("16915.983")]

    lines = printed(rows)

    assert sum(map(to_cents, rows)) == Decimal("50747.94") and to_cents(sum(rows)) == Decimal("50747.95")
    assert sum(lines) == Decimal("50747.95") and lines[0] == Decimal("16915.99")


def test_it_prints_to_a_total_it_is_given_and_in_other_units():
    assert printed([Decimal("1.004"), Decimal("2.004")], total=Decimal("3.02")) == [Decimal("1.01"), Decimal("2.01")]
    assert printed([Decimal("1.004"), Decimal("2.004")], total=Decimal("2.99")) == [Decimal("1.00"), Decimal("1.99")]
    assert printed([Decimal("1.25"), Decimal("1.25")], unit=Decimal("0.1")) == [Decimal("1.3"), Decimal("1.2")]
    assert printed([]) == []


@given(amounts)
def test_printed_lines_sum_to_the_printed_total_which_is_the_exact_total_rounded(values: list[Decimal]):
    lines = printed(values)

    assert sum(lines, Decimal(0)) == to_cents(sum(values, Decimal(0)))
    assert all(abs(line - value) < CENT for line, value in zip(lines, values, strict=True))
    assert all(line == line.quantize(CENT) for line in lines)


@given(amounts, st.integers(min_value=-1, max_value=1))
def test_lines_printed_under_a_parents_printed_figure_add_up_to_it(values: list[Decimal], moved: int):
    # A team's printed figure is its statement line: the exact sum rounded, moved by at most a cent.
    parent = to_cents(sum(values, Decimal(0))) + moved * CENT

    lines = printed(values, total=parent)

    assert not values or sum(lines, Decimal(0)) == parent
    assert all(abs(line - value) <= 2 * CENT for line, value in zip(lines, values, strict=True))
