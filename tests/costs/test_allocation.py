"""Who holds a GPU-hour, on plain data (no database): governance/costs/allocation.py."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from governance.costs.allocation import Claim, Holder, Seen, allocate, capacity_by_hour, day_allocation

H100 = "NVIDIA H100 80GB HBM3"
NINE = datetime(2026, 11, 3, 9, tzinfo=UTC)
HOUR = timedelta(hours=1)
D = Decimal


def test_it_bills_every_claim_in_full_while_they_fit():
    billed = allocate(D(32), D(0), [Claim("a", sampled=D(8)), Claim("b", declared=D(16))])

    assert billed == {"a": D(8), "b": D(16)}


def test_it_fills_what_sampled_and_free_gpus_leave_with_declared_counts_pro_rata():
    claims = [Claim("seen", sampled=D(8)), Claim("v", declared=D(8)), Claim("evil", declared=D(100_000))]

    billed = allocate(D(32), D(4), claims)

    assert billed["seen"] == D(8)
    assert abs(billed["v"] + billed["evil"] - D(20)) < D("1e-20")  # 32 - 8 sampled - 4 seen free
    assert abs(billed["v"] - D(8) * D(20) / D(100_008)) < D("1e-20")


def test_it_scales_sampled_gpus_down_only_when_they_alone_pass_capacity_and_never_bills_unconfirmed_ones():
    billed = allocate(D(4), D(0), [Claim("a", sampled=D(6), declared=D(2)), Claim("b", sampled=D(2), unconfirmed=D(9))])

    assert billed == {"a": D(3), "b": D(1)}


def test_two_jobs_seen_on_the_same_gpus_share_each_hour_and_a_declared_count_adds_only_gpus_not_seen():
    holders = [Holder(1, 2, H100, "", NINE, NINE + HOUR), Holder(2, 2, H100, "", NINE, NINE + HOUR)]
    seen = [Seen(job, gpu, NINE, H100, "", False) for job in (1, 2) for gpu in (10, 11)]
    capacity = capacity_by_hour({(H100, 1, NINE, NINE + HOUR): 8})  # type: ignore[dict-item]

    held = day_allocation(NINE, NINE + 24 * HOUR, holders, seen, capacity, {})

    assert {key: (h.claimed, h.billed) for key, h in held.items()} == {
        (1, H100, ""): (D(1), D(1)),
        (2, H100, ""): (D(1), D(1)),
    }


def test_capacity_counts_each_hour_by_the_part_of_it_the_gpus_exist():
    capacity = capacity_by_hour({(H100, 1, NINE + timedelta(minutes=30), NINE + 2 * HOUR): 4})  # type: ignore[dict-item]

    assert capacity[H100] == {NINE: D(2), NINE + HOUR: D(4)}
