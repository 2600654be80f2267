"""Waste is a partition of the bill: each wasted GPU-hour under one finding, priced from the job's ledger rows."""

from datetime import date
from decimal import Decimal
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command

from governance.efficiency.models import Finding
from governance.efficiency.services import findings_evaluate_all
from governance.efficiency.waste import DayBill, waste_allocate
from tests.factories import at, committed, ingest, job_record, rate, series
from tests.invariants import assert_billing_invariants, assert_waste_within_bill

H100 = "NVIDIA H100 80GB HBM3"
D1, D2 = date(2026, 11, 3), date(2026, 11, 4)


def test_each_wasted_hour_goes_to_the_first_finding_that_claims_it():
    bills = {D1: DayBill(held_hours=Decimal(10), cost=Decimal(20))}
    claims = {"low_utilization": {D1: 9.5}, "idle_gpu": {D1: 6.0}, "mig_fit": {D1: 8.0}}

    wastes = waste_allocate(claims, bills)

    assert wastes["idle_gpu"].money == Decimal("12.00")  # 6 h at 2.00
    assert wastes["mig_fit"].money == Decimal("4.00")  # the 2 h it claims beyond idle_gpu's
    assert wastes["low_utilization"].money == Decimal("3.00")  # the last 1.5 h
    assert sum(w.money for w in wastes.values()) == Decimal("19.00")


def test_no_rule_claims_more_hours_than_the_day_billed():
    bills = {D1: DayBill(held_hours=Decimal(2), cost=Decimal("3.00")), D2: DayBill(Decimal(1), Decimal("5.00"))}

    claims = {"idle_gpu": {D1: 5.0, D2: 1.0}, "batch_headroom": {D1: 9.0}, "x": {date(2026, 1, 1): 3.0}}

    wastes = waste_allocate(claims, bills)

    assert wastes["idle_gpu"].money == Decimal("8.00")  # each day at its own price, capped at its hours
    assert wastes["batch_headroom"].money == 0 and wastes["x"].money == 0


def test_cents_add_up_to_the_rounded_total():
    bills = {D1: DayBill(held_hours=Decimal(3), cost=Decimal("1.00"))}

    wastes = waste_allocate({"idle_gpu": {D1: 1.0}, "overallocated": {D1: 2.0}, "low_utilization": {D1: 3.0}}, bills)

    assert [w.money for w in wastes.values()] == [Decimal("0.33"), Decimal("0.34"), Decimal("0.33")]


@pytest.mark.django_db
@time_machine.travel("2026-11-20T10:00:00Z", tick=False)
def test_an_idle_mig_slice_wastes_its_slice_at_the_rate_it_ran_under(cast):
    rate(H100, "7.00", valid_from="2026-01-01T00:00:00Z")
    mig = {"gpu_uuid": "MIG-aaaa", "gpu_model": H100, "mig_profile": "1g.10gb", "mem_total_mib": 9728.0,
           "mem_used_mib": 900.0}  # fmt: skip
    ingest([
        job_record(gpus=1, start_time="2026-11-05T00:00:00Z", end_time="2026-11-05T10:00:00Z", state="completed"),
        *series(start=at("2026-11-05T00:00:00Z"), minutes=600, every_s=300, sm_util=0.0, **mig),
    ])  # fmt: skip
    findings_evaluate_all(now=at("2026-11-10T00:00:00Z"))
    rate(H100, "21.00", valid_from="2026-11-15T00:00:00Z")  # later: re-prices open days, not the job's

    findings = list(Finding.objects.all())
    assert [(f.rule, f.waste, f.currency) for f in findings] == [("idle_gpu", Decimal("10.00"), "USD")]
    assert findings[0].wasted_gpu_hours == Decimal("10.0000")  # slice-hours
    assert_waste_within_bill()
    assert_billing_invariants()


@pytest.mark.django_db
@time_machine.travel("2026-11-20T10:00:00Z", tick=False)
def test_a_rate_correction_of_the_days_a_job_ran_re_prices_its_waste(cast):
    rate(H100, "2.00", valid_from="2026-01-01T00:00:00Z")
    ingest([
        job_record(gpus=1, start_time="2026-11-05T00:00:00Z", end_time="2026-11-05T04:00:00Z", state="completed"),
        *series(start=at("2026-11-05T00:00:00Z"), minutes=240, every_s=300, sm_util=0.0),
    ])  # fmt: skip
    findings_evaluate_all(now=at("2026-11-10T00:00:00Z"))
    assert Finding.objects.get(rule="idle_gpu").waste == Decimal("8.00")

    rate(H100, "3.00", valid_from="2026-11-01T00:00:00Z")  # the pricing pass re-evaluates the job

    assert Finding.objects.get(rule="idle_gpu").waste == Decimal("12.00")


@pytest.mark.django_db
def test_the_demo_datas_waste_stays_within_every_bill(cast):
    with committed():
        call_command("seed_demo", gpus=6, days=3, interval=900, stdout=StringIO())
    # seed_demo evaluates after its import commits; in a test that commit comes at the end of the block above.
    call_command("evaluate_findings", stdout=StringIO())

    figures = assert_waste_within_bill()

    assert Finding.objects.filter(waste__gt=0).exists()
    assert sum(w for w, _ in figures["jobs"].values()) <= sum(b or 0 for _, b in figures["jobs"].values())
