from decimal import Decimal

import pytest
import time_machine

from governance.costs.selectors import UNATTRIBUTED, chargeback_by_team
from governance.lib.months import Month
from tests.costs.conftest import declare
from tests.factories import ingest, job_record, rate

pytestmark = pytest.mark.django_db

NOV = Month(2026, 11)


def nlp(month: Month):
    return next(c for c in chargeback_by_team(month=month) if c.team == "NLP")


def test_it_charges_allocated_gpu_hours_times_the_rate_per_team(cast):
    rate(price="2.50")
    declare(8)  # billing is bounded by the GPUs that exist: a cluster of no known GPUs bills none
    ingest([
        job_record(job_id="1", gpus=8, start_time="2026-11-03T09:12:00Z", end_time="2026-11-03T11:12:00Z"),
        job_record(job_id="2", project="detector", team="vision", gpus=1,
                   start_time="2026-11-04T00:00:00Z", end_time="2026-11-04T10:00:00Z"),
    ])  # fmt: skip

    charges = {c.team: c for c in chargeback_by_team(month=NOV)}

    assert charges["NLP"].gpu_hours == Decimal(16) and charges["NLP"].cost == Decimal(40)
    assert charges["Vision"].gpu_hours == Decimal(10) and charges["Vision"].cost == Decimal(25)


def test_a_job_across_the_month_end_is_split_between_the_months(cast):
    rate(price="1.00")
    declare(2)
    ingest([job_record(start_time="2026-11-30T20:00:00Z", submit_time="2026-11-30T19:00:00Z",
                       end_time="2026-12-01T06:00:00Z", gpus=2)])  # fmt: skip

    assert nlp(NOV).gpu_hours == Decimal(8)
    assert nlp(NOV.next()).gpu_hours == Decimal(12)


@time_machine.travel("2026-11-10T12:00:00Z", tick=False)
def test_a_running_job_is_charged_up_to_now(cast):
    rate(price="1.00")
    declare(4)
    ingest([job_record(start_time="2026-11-10T09:00:00Z", submit_time="2026-11-10T09:00:00Z", gpus=4)])

    assert nlp(NOV).cost == Decimal(12)


def test_a_job_of_an_unmapped_account_is_charged_as_unattributed(cast):
    rate(price="1.00")
    ingest([job_record(project="mystery", team=None, end_time="2026-11-03T10:12:00Z")])

    assert [c.team for c in chargeback_by_team(month=NOV)] == [UNATTRIBUTED]
