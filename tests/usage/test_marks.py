"""Which job-days a job's record marks for pricing: the days that really changed, not every day up to now."""

from datetime import date, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import transaction

from collectors.records import decode_batch
from governance.costs.models import CapacityDay, Charge
from governance.costs.reprice import charges_reprice
from governance.fleet.models import Cluster
from governance.usage.models import PricingMark
from governance.usage.services import usage_records_write
from tests.costs.conftest import cents, declare, set_rate
from tests.factories import H100, at, batch_body, committed, ingest, job_record, sample_record
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db


def _marked_days(records: list[dict], now: str) -> list[date]:
    """Write a batch as the worker does, leaving its marks unpriced, and read the job-days it marked."""
    with time_machine.travel(now, tick=False), transaction.atomic():
        usage_records_write(batch=decode_batch(batch_body(records)), create_projects=True)
    days = PricingMark.objects.filter(job_id__isnull=False).values_list("day", flat=True).distinct()
    return sorted(days)


def _days(first: str, last: str) -> list[date]:
    lo, hi = date.fromisoformat(first), date.fromisoformat(last)
    return [lo + timedelta(days=n) for n in range((hi - lo).days + 1)]


def test_a_job_loaded_in_arrears_is_marked_to_its_last_sample_not_to_now(cast):
    samples = [sample_record(ts=f"2026-11-0{d}T10:00:00Z") for d in (3, 4, 5)]

    marked = _marked_days([job_record(), *samples], now="2026-12-04T12:00:00Z")

    assert marked == _days("2026-11-03", "2026-11-05")


def test_a_job_seen_before_its_samples_are_folded_is_marked_to_its_last_folded_sample(cast):
    _marked_days([sample_record(ts="2026-11-04T10:00:00Z")], now="2026-11-06T12:00:00Z")  # a pod-like first sight
    PricingMark.objects.all().delete()

    marked = _marked_days([job_record()], now="2026-12-04T12:00:00Z")

    assert marked == _days("2026-11-03", "2026-11-04")


def test_a_new_job_no_sample_shows_is_marked_to_now_since_its_count_is_billed_to_now(cast):
    marked = _marked_days([job_record(gpus=2)], now="2026-11-06T12:00:00Z")

    assert marked == _days("2026-11-03", "2026-11-06")


def test_a_new_job_that_ended_is_marked_to_its_end(cast):
    record = job_record(end_time="2026-11-04T02:00:00Z", state="completed")

    marked = _marked_days([record], now="2026-12-04T12:00:00Z")

    assert marked == _days("2026-11-03", "2026-11-04")


def test_a_record_that_changes_nothing_the_ledger_prices_marks_nothing(cast):
    _marked_days([job_record(end_time="2026-11-04T02:00:00Z", state="completed")], now="2026-12-04T12:00:00Z")
    PricingMark.objects.all().delete()

    marked = _marked_days(
        [job_record(end_time="2026-11-04T02:00:00Z", state="completed", labels={"kind": "eval"})],
        now="2026-12-04T12:00:00Z",
    )

    assert marked == []


def test_a_job_whose_end_arrives_late_is_no_longer_billed_past_its_end(cast):
    Cluster.objects.create(name="c1")
    set_rate(H100, "2.00")
    declare(4, since="2026-11-01")
    with time_machine.travel("2026-11-06T12:00:00Z", tick=False):
        ingest([job_record(gpus=1)])  # open, declared: billed up to now
        assert Charge.objects.filter(kind="usage", day=date(2026, 11, 6)).exists()

        ingest([job_record(gpus=1, end_time="2026-11-04T09:12:00Z", state="completed")])

    usage = Charge.objects.filter(kind="usage")
    assert sorted(set(usage.values_list("day", flat=True))) == _days("2026-11-03", "2026-11-04")
    assert cents(sum(c.cost for c in usage)) == cents(48)  # one GPU for exactly 24 h at 2.00
    assert at("2026-11-04T09:12:00Z") == max(c.period_end for c in usage)
    assert_billing_invariants()


def _capacity_hours(day: str) -> Decimal:
    rows = CapacityDay.objects.filter(day=date.fromisoformat(day))
    return sum((r.gpu_hours for r in rows), Decimal(0))


def test_a_gpu_that_reports_again_after_looking_gone_re_prices_the_days_it_was_counted_out(cast):
    set_rate(H100, "2.00")
    with time_machine.travel("2026-11-03T10:00:00Z", tick=False):
        ingest([sample_record(ts="2026-11-03T09:15:00Z", job_id=None)])
    # Priced while it was silent past the grace (24 h): the GPU looked gone from its last report on.
    PricingMark.objects.bulk_create(
        [
            PricingMark(cluster_id=Cluster.objects.get(name="c1").pk, day=day)
            for day in _days("2026-11-04", "2026-11-05")
        ]
    )
    with committed():
        charges_reprice(now=at("2026-11-06T12:00:00Z"))
    assert _capacity_hours("2026-11-04") == 0

    with time_machine.travel("2026-11-06T13:00:00Z", tick=False):
        ingest([sample_record(ts="2026-11-06T12:30:00Z", job_id=None)])

    assert _capacity_hours("2026-11-04") == _capacity_hours("2026-11-05") == 24
    assert not PricingMark.objects.exists()
    assert_billing_invariants()


def test_a_gpu_that_reports_within_its_grace_marks_only_the_days_of_its_samples(cast):
    with time_machine.travel("2026-11-03T10:00:00Z", tick=False):
        ingest([sample_record(ts="2026-11-03T09:15:00Z", job_id=None)])

    with time_machine.travel("2026-11-04T09:00:00Z", tick=False), transaction.atomic():
        usage_records_write(
            batch=decode_batch(batch_body([sample_record(ts="2026-11-04T08:30:00Z", job_id=None)])),
            create_projects=True,
        )

    assert sorted(set(PricingMark.objects.values_list("day", flat=True))) == [date(2026, 11, 4)]
