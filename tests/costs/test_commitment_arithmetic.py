"""The commitment arithmetic on plain data (governance/costs/commitments.py): no database."""

from datetime import UTC, date, datetime
from decimal import Decimal

from governance.costs.commitments import covered_hours, day_rows, usage_apply
from governance.costs.terms import CommitmentTerm

H = Decimal
DAY3 = date(2026, 11, 3)


def hour(h: int) -> datetime:
    return datetime(2026, 11, 3, h, tzinfo=UTC)


FOUR = CommitmentTerm(
    1, "A100s", 7, "NLP", "c1", "A100", 4, H("2.50"), H("10"), hour(0), datetime(2026, 11, 4, tzinfo=UTC)
)


def test_an_hour_under_the_commitment_is_covered_in_full():
    assert covered_hours(FOUR, {1: {hour(8): H(2)}, 2: {hour(8): H(1)}}) == {1: H(2), 2: H(1)}


def test_an_hour_over_the_commitment_is_shared_in_proportion_to_the_gpus():
    assert covered_hours(FOUR, {1: {hour(10): H(2)}, 2: {hour(10): H(4)}}) == {1: H("1.333333"), 2: H("2.666667")}


def test_hours_outside_the_commitment_are_not_covered():
    later = CommitmentTerm(1, "", 7, "NLP", "c1", "A100", 4, H("2.50"), H(0), hour(12), hour(13))
    assert covered_hours(later, {1: {hour(10): H(2), hour(12): H(2)}}) == {1: H(2)}


def test_a_row_costs_covered_hours_at_the_committed_price_and_the_rest_at_the_contracted_rate():
    row = {"gpu_hours": H(4), "list_cost": H(16), "cost": H(16), "idle_cost": H(4)}
    usage_apply(row, FOUR, H(3))
    # 3 h x 2.50 + 1 h x 4.00 less 10%
    assert (row["cost"], row["contracted_cost"], row["billed_cost"]) == (H("11.1"), H("14.4"), H("3.6"))
    assert (row["commitment_gpu_hours"], row["commitment_id"], row["idle_cost"]) == (H(3), 1, H("2.775"))


def test_the_days_fee_is_billed_and_what_was_not_drawn_is_charged_as_unused():
    purchase, unused = day_rows(FOUR, 1, DAY3, datetime(2026, 11, 20, tzinfo=UTC), H(10), H(25), "USD", True)
    assert (purchase["kind"], purchase["billed_cost"], purchase["cost"], purchase["commitment_gpu_hours"]) == (
        "purchase", H(240), 0, H(96))  # fmt: skip
    assert (unused["kind"], unused["gpu_hours"], unused["cost"], unused["billed_cost"]) == ("unused", H(86), H(215), 0)


def test_a_running_day_bills_the_commitment_up_to_now():
    (purchase, unused) = day_rows(FOUR, 1, DAY3, hour(6), H(0), H(0), "USD", True)
    assert (purchase["billed_cost"], unused["cost"], purchase["period_end"]) == (H(60), H(60), hour(6))
