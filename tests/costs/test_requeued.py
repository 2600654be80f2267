"""A requeued Slurm job is billed for its runs, never for the wait in between (records as the Slurm agent sends them:
sacct's record per run, collectors/slurm.py). Totals computed by hand here."""

from decimal import Decimal

import pytest
import time_machine

from collectors.records import BatchInvalid
from governance.costs.models import Charge, OverClaim
from governance.costs.selectors import chargeback_by_team, reconcile
from governance.lib.months import Month
from governance.usage.models import Job
from tests.costs.conftest import by_team, cents, declare, set_rate
from tests.factories import H100, ingest, job_record
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db

NOV = Month(2026, 11)
FIRST = {"start": "2026-11-10T10:00:00Z", "end": "2026-11-10T12:00:00Z"}  # 2 h, then requeued
AGAIN = "2026-11-10T14:00:00Z"  # Slurm held it 2 h before it ran again
END = "2026-11-10T17:00:00Z"  # 3 h more


def requeued(**fields):
    return job_record(job_id="77", gpus=2, submit_time="2026-11-10T09:00:00Z", **fields)


def billed_gpu_hours(job_id: str = "77") -> Decimal:
    return sum(Charge.objects.filter(kind="usage", job__external_id=job_id).values_list("gpu_hours", flat=True),
               Decimal(0))  # fmt: skip


def test_a_requeued_job_is_billed_for_its_runs_and_not_while_it_waits(cast, cluster):
    set_rate(H100, "2.00")
    declare(4)
    with time_machine.travel("2026-11-10T11:00:00Z", tick=False):
        ingest([requeued(start_time=FIRST["start"])])
    with time_machine.travel("2026-11-10T13:30:00Z", tick=False):
        # requeued at 12:00: back in the queue, its first run accounted (sacct's REQUEUED record)
        ingest([requeued(start_time=None, state="pending", runs=[FIRST])])
        assert billed_gpu_hours() == 2 * 2
    with time_machine.travel("2026-11-10T15:00:00Z", tick=False):
        ingest([requeued(start_time=AGAIN, runs=[FIRST, {"start": AGAIN}])])
        assert billed_gpu_hours() == 2 * 2 + 1 * 2
    with time_machine.travel("2026-12-02T10:00:00Z", tick=False):
        runs = [FIRST, {"start": AGAIN, "end": END}]
        ingest([requeued(start_time=AGAIN, end_time=END, state="completed", runs=runs)])

        # sacct's elapsed summed over the runs, x 2 GPUs: (2 h + 3 h) x 2
        assert billed_gpu_hours() == 10
        assert by_team(chargeback_by_team(month=NOV))["NLP"] == cents(10 * Decimal("2.00"))
        job = Job.objects.get(external_id="77")
        assert (job.start_time.isoformat(), job.end_time.isoformat()) == ("2026-11-10T10:00:00+00:00",
                                                                          "2026-11-10T17:00:00+00:00")  # fmt: skip
        assert reconcile(month=NOV).ok
        assert_billing_invariants()


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_the_gpus_a_requeued_job_left_while_it_waited_go_to_the_job_that_ran_there(cast, cluster):
    set_rate(H100, "2.00")
    declare(2)  # the two jobs together would claim 4 GPUs if the wait were held: the day is priced by allocation
    ingest([
        requeued(start_time=AGAIN, end_time=END, state="completed", runs=[FIRST, {"start": AGAIN, "end": END}]),
        job_record(job_id="78", gpus=2, submit_time="2026-11-10T12:00:00Z", start_time="2026-11-10T12:00:00Z",
                   end_time=AGAIN, state="completed"),
    ])  # fmt: skip

    assert billed_gpu_hours("77") == 10
    assert billed_gpu_hours("78") == 2 * 2
    assert not OverClaim.objects.exists()
    assert_billing_invariants()


def test_a_run_that_ends_before_it_starts_is_refused_naming_the_field(cast, cluster):
    with pytest.raises(BatchInvalid) as refused:
        ingest([requeued(start_time=AGAIN, runs=[{"start": END, "end": AGAIN}])])

    assert "runs" in str(refused.value.errors)
    assert not Job.objects.exists()
