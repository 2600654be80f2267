"""A close prices only what its month has left: a month the worker kept current is checked and frozen as it is."""

from datetime import date
from decimal import Decimal

import pytest
import time_machine
from django.db import transaction

from collectors.records import decode_batch
from governance.costs.models import Charge, StatementLine
from governance.costs.selectors import chargeback_by_team
from governance.costs.services import statement_close
from governance.costs.settle import month_settle
from governance.lib.months import Month
from governance.usage.models import PricingMark
from governance.usage.services import usage_records_write
from tests.costs.conftest import by_team, cents, declare, set_rate
from tests.factories import H100, at, batch_body, ingest, job_record
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db

NOV = Month(2026, 11)
AFTER = "2026-12-02T10:00:00Z"


def job(job_id: str, start: str, end: str | None, gpus: int = 1) -> dict:
    return job_record(job_id=job_id, gpus=gpus, start_time=start, submit_time=start, end_time=end,
                      state="completed" if end else "running")  # fmt: skip


@pytest.fixture
def november(cast, cluster):
    """Two GPUs at 2.00; one 2-hour job on November 3, priced by the worker after the month ended."""
    set_rate(H100, "2.00")
    declare(2, since="2026-11-01")
    with time_machine.travel(AFTER, tick=False):
        ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-03T02:00:00Z")])


def test_a_month_the_worker_kept_current_is_frozen_without_pricing_it_again(november):
    with time_machine.travel(AFTER, tick=False):
        month_settle(month=NOV, now=at(AFTER))  # the worker's last word on the month
        rows = set(Charge.objects.filter(month=NOV.start.date()).values_list("id", flat=True))

        with transaction.atomic():
            settled = month_settle(month=NOV, now=at(AFTER))
        statement_close(month=NOV)

    assert (settled.marks, settled.stale_days, settled.repriced.job_days, settled.full) == (0, 0, 0, False)
    assert set(Charge.objects.filter(month=NOV.start.date()).values_list("id", flat=True)) == rows
    assert cents(sum(line.cost for line in StatementLine.objects.filter(kind="usage"))) == cents(4)
    assert_billing_invariants()


def test_the_close_prices_the_marks_still_pending_for_its_month(november):
    with time_machine.travel(AFTER, tick=False):
        with transaction.atomic():  # written, not priced yet: its marks wait for the worker
            record = job("2", "2026-11-10T00:00:00Z", "2026-11-10T03:00:00Z")
            usage_records_write(batch=decode_batch(batch_body([record])), create_projects=True)
        assert PricingMark.objects.filter(day=date(2026, 11, 10)).exists()

        statement_close(month=NOV)

    assert not PricingMark.objects.filter(day__gte=date(2026, 11, 1), day__lt=date(2026, 12, 1)).exists()
    frozen = StatementLine.objects.filter(kind="usage")
    assert cents(sum(line.cost for line in frozen)) == cents(10)  # 2 + 3 GPU-hours at 2.00
    assert by_team(chargeback_by_team(month=NOV))["NLP"] == cents(10)
    assert_billing_invariants()


def test_a_job_priced_while_it_ran_is_charged_to_the_end_of_the_month_by_the_close(cast, cluster):
    set_rate(H100, "2.00")
    declare(2, since="2026-11-01")
    with time_machine.travel("2026-11-30T12:00:00Z", tick=False):
        ingest([job("3", "2026-11-30T00:00:00Z", None)])  # priced up to noon on the month's last day
    assert cents(sum(c.cost for c in Charge.objects.filter(kind="usage"))) == cents(24)

    with time_machine.travel(AFTER, tick=False):
        statement_close(month=NOV)

    usage = StatementLine.objects.filter(kind="usage")
    assert cents(sum(line.cost for line in usage)) == cents(48)  # the whole of November 30
    assert cents(sum(line.cost for line in StatementLine.objects.all())) == cents(Decimal(2 * 720 * 2))
    assert_billing_invariants()
