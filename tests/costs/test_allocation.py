"""Who holds a GPU-hour, on plain data (no database): governance/costs/allocation.py."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from governance.costs.allocation import (
    Claim,
    Holder,
    Seen,
    allocate,
    capacity_by_hour,
    day_allocation,
    seen_weight,
)
from governance.costs.pricing import mig_share

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
    seen = [Seen(job, gpu, NINE, H100, "", False, seen_weight(6, 12)) for job in (1, 2) for gpu in (10, 11)]
    capacity = capacity_by_hour({(H100, 1, NINE, NINE + HOUR): 8})  # type: ignore[dict-item]

    held = day_allocation(NINE, NINE + 24 * HOUR, holders, seen, capacity, {})

    assert {key: (h.claimed, h.billed) for key, h in held.items()} == {
        (1, H100, ""): (D(1), D(1)),
        (2, H100, ""): (D(1), D(1)),
    }


def test_capacity_counts_each_hour_by_the_part_of_it_the_gpus_exist():
    capacity = capacity_by_hour({(H100, 1, NINE + timedelta(minutes=30), NINE + 2 * HOUR): 4})  # type: ignore[dict-item]

    assert capacity[H100] == {NINE: D(2), NINE + HOUR: D(4)}


def test_a_gpu_handed_from_one_job_to_the_next_within_the_hour_goes_to_each_for_the_time_it_held_it():
    twenty, twenty_five = NINE + timedelta(minutes=20), NINE + timedelta(minutes=25)
    holders = [Holder(1, None, H100, "", NINE - HOUR, twenty), Holder(2, None, H100, "", twenty_five, None)]
    # Sampled every minute: 20 samples of job 1, then 35 of job 2, on the one GPU.
    seen = [Seen(1, 10, NINE, H100, "", False, seen_weight(20, 55)), Seen(2, 10, NINE, H100, "", False,
                                                                           seen_weight(35, 55))]  # fmt: skip
    capacity = capacity_by_hour({(H100, 1, NINE, NINE + HOUR): 1})  # type: ignore[dict-item]

    held = day_allocation(NINE, NINE + HOUR, holders, seen, capacity, {})

    # Each is billed the part of the hour it held the GPU, in full: no over-claim, 5 minutes unallocated.
    assert {key: (h.claimed, h.billed) for key, h in held.items()} == {
        (1, H100, ""): (D(1) / 3, D(1) / 3),
        (2, H100, ""): (D(35) / 60, D(35) / 60),
    }


def test_pods_time_slicing_a_gpu_of_unknown_times_share_its_hour_by_the_samples_each_was_seen_in():
    holders = [Holder(1, None, H100, "", None, None), Holder(2, None, H100, "", None, None)]
    seen = [Seen(1, 10, NINE, H100, "", False, seen_weight(15, 60)), Seen(2, 10, NINE, H100, "", False,
                                                                           seen_weight(45, 60))]  # fmt: skip
    capacity = capacity_by_hour({(H100, 1, NINE, NINE + HOUR): 1})  # type: ignore[dict-item]

    held = day_allocation(NINE, NINE + HOUR, holders, seen, capacity, {})

    assert {key: h.billed for key, h in held.items()} == {(1, H100, ""): D("0.25"), (2, H100, ""): D("0.75")}


def test_a_mig_share_is_its_fraction_of_a_gpu_and_an_unknown_profile_is_no_share():
    assert mig_share(H100, "") == 1
    assert mig_share(H100, "1g.10gb") == D(1) / 7
    assert mig_share(H100, "zz") == 0


def test_shares_declared_on_one_gpu_are_billed_as_declared_and_a_job_of_unknown_share_gets_what_they_leave():
    quarter = D("0.25")
    holders = [Holder(1, quarter, H100, "", NINE, None), Holder(2, quarter, H100, "", NINE, None),
               Holder(3, None, H100, "", NINE, None)]  # fmt: skip
    seen = [Seen(job, 10, NINE, H100, "", False, seen_weight(20, 60)) for job in (1, 2, 3)]
    capacity = capacity_by_hour({(H100, 1, NINE, NINE + HOUR): 1})  # type: ignore[dict-item]

    held = day_allocation(NINE, NINE + HOUR, holders, seen, capacity, {})

    assert {key[0]: h.billed for key, h in held.items()} == {1: quarter, 2: quarter, 3: D("0.5")}


def test_shares_that_claim_more_than_the_gpu_are_scaled_down_pro_rata_and_the_rest_is_an_over_claim():
    holders = [Holder(1, D("0.8"), H100, "", NINE, None), Holder(2, D("0.6"), H100, "", NINE, None)]
    seen = [Seen(job, 10, NINE, H100, "", False, seen_weight(30, 60)) for job in (1, 2)]
    capacity = capacity_by_hour({(H100, 1, NINE, NINE + HOUR): 1})  # type: ignore[dict-item]

    held = day_allocation(NINE, NINE + HOUR, holders, seen, capacity, {})

    assert {key[0]: (h.claimed, h.billed) for key, h in held.items()} == {
        1: (D("0.8"), D("0.8") / D("1.4")),
        2: (D("0.6"), D("0.6") / D("1.4")),
    }


def test_a_job_that_began_after_a_gpu_was_last_sampled_free_is_billed_in_full_and_a_whole_hour_claim_is_not():
    # 4 GPUs sampled every 10 minutes: 3 held by a job all hour, the fourth seen free at all 6 samples (free: 1).
    # A 1-GPU job began at 09:53, after the last sample; its claim may only have taken that last interval.
    ten = D(1) / 6
    starter = Holder(2, 1, H100, "", NINE + timedelta(minutes=53), None)
    seen = [Seen(1, gpu, NINE, H100, "", False) for gpu in range(3)]
    whole = Holder(1, 3, H100, "", NINE - HOUR, None)
    end = NINE + HOUR
    capacity = {H100: {NINE: D(4)}}

    vouched = day_allocation(NINE, end, [whole, starter], seen, capacity, {(H100, NINE): D(1)},
                             {(H100, NINE): (ten, ten)})  # fmt: skip
    unvouched = day_allocation(NINE, end, [whole, starter], seen, capacity, {(H100, NINE): D(1)})
    liar = Holder(3, 1, H100, "", NINE, None)  # claims the free GPU from the hour's start: samples say otherwise
    lied = day_allocation(NINE, end, [whole, liar], seen, capacity, {(H100, NINE): D(1)}, {(H100, NINE): (ten, ten)})

    assert vouched[(2, H100, "")].billed == vouched[(2, H100, "")].claimed == D(7) / 60
    assert unvouched[(2, H100, "")].billed == 0  # as before: an over-claim on an honest record
    assert (lied[(3, H100, "")].claimed, lied[(3, H100, "")].billed) == (D(1), D(0))
    assert vouched[(1, H100, "")].billed == lied[(1, H100, "")].billed == D(3)


def test_a_sampled_job_that_began_mid_hour_leaves_the_declared_ones_what_the_interval_before_it_may_have_held():
    # GPU 0 free at 09:00 and 09:10, then job 1 (began 09:17) from 09:20: samples show it free a third of the hour.
    third = D(1) / 3
    ten = D(1) / 6
    sampled = Holder(1, 1, H100, "", NINE + timedelta(minutes=17), None)
    other = Holder(2, 1, H100, "", NINE - HOUR, None)  # declared, on GPU 1, which no sample reached this hour
    seen = [Seen(1, 0, NINE, H100, "", False)]
    held = day_allocation(NINE, NINE + HOUR, [sampled, other], seen, {H100: {NINE: D(2)}}, {(H100, NINE): third},
                          {(H100, NINE): (ten, ten)})  # fmt: skip

    assert held[(1, H100, "")].billed == D(43) / 60
    assert held[(2, H100, "")].billed == held[(2, H100, "")].claimed == D(1)
