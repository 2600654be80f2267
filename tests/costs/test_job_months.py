"""The ledger summed per job and month (`JobMonth`), which the pages' job rankings and cost by user read: kept
equal to the ledger by the pass that writes it, jobs whose rows moved or went included."""

from datetime import date

import pytest
import time_machine
from django.db.models import Sum

from governance.costs.breakdowns import cost_by, jobs_month
from governance.costs.models import Charge, JobMonth
from governance.costs.summaries import ledger_days_refresh
from governance.lib.months import Month
from tests.costs.conftest import cents, declare, set_rate
from tests.factories import H100, ingest, job_record
from tests.invariants import assert_billing_invariants, assert_job_months_equal_ledger

pytestmark = pytest.mark.django_db

NOV = Month(2026, 11)


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def job(job_id: str, start: str, end: str | None, gpus: int = 1, **more):
    return job_record(job_id=job_id, gpus=gpus, start_time=start, submit_time=start, end_time=end, **more)


@time_machine.travel("2026-11-08T00:00:00Z", tick=False)
def test_a_job_has_one_row_a_month_with_the_days_it_ran(cast, cluster):
    set_rate(H100, "2.00")
    declare(2)
    ingest([job("1", "2026-11-03T12:00:00Z", "2026-11-05T12:00:00Z"), job("2", "2026-11-04T00:00:00Z", None)])

    first = JobMonth.objects.get(job_ref="1")
    assert (first.first_day, first.last_day, first.rows, first.gpu_hours) == (
        date(2026, 11, 3),
        date(2026, 11, 5),
        3,
        48,
    )
    assert cents(first.cost) == cents(96)
    assert_billing_invariants()


@time_machine.travel("2026-11-08T00:00:00Z", tick=False)
def test_a_job_whose_later_days_go_keeps_only_the_days_it_still_has(cast, cluster):
    set_rate(H100, "2.00")
    declare(1)
    ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-06T00:00:00Z")])
    ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-03T06:00:00Z")])

    row = JobMonth.objects.get(job_ref="1")
    assert (row.first_day, row.last_day, row.gpu_hours) == (date(2026, 11, 3), date(2026, 11, 3), 6)
    assert_billing_invariants()


@time_machine.travel("2026-11-08T00:00:00Z", tick=False)
def test_rows_removed_from_a_day_a_pass_rewrote_leave_the_job_month_with_the_rest(cast, cluster):
    set_rate(H100, "2.00")
    declare(1)
    ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-06T00:00:00Z")])
    gone = Charge.objects.get(kind="usage", day="2026-11-05")

    gone.delete()  # as a writer that removed the job's rows of that day would
    ledger_days_refresh([(gone.cluster_id, gone.day)])

    assert JobMonth.objects.get(job_ref="1").last_day == date(2026, 11, 4)
    assert_job_months_equal_ledger()


@time_machine.travel("2026-11-08T00:00:00Z", tick=False)
def test_the_rankings_and_cost_by_user_read_from_the_job_months_equal_the_ledgers(cast, cluster):
    set_rate(H100, "2.00")
    declare(4)
    ingest([
        job("1", "2026-11-03T00:00:00Z", "2026-11-04T00:00:00Z", user="ada"),
        job("2", "2026-11-03T00:00:00Z", "2026-11-03T05:00:00Z", user="bob", gpus=2),
        job("3", "2026-11-04T00:00:00Z", "2026-11-05T12:00:00Z", user="ada"),
    ])  # fmt: skip
    usage = Charge.objects.filter(kind="usage").values("job_ref", "user_name")
    by_job = {r["job_ref"]: (r["c"], r["i"]) for r in usage.annotate(c=Sum("cost"), i=Sum("idle_cost"))}
    by_user = {r["user_name"]: r["c"] for r in usage.values("user_name").annotate(c=Sum("cost"))}

    jobs = jobs_month(month=NOV)
    users = cost_by(month=NOV, team_ids=None, by="user")

    assert JobMonth.objects.count() == 3
    assert {j.job_ref: (j.cost, j.idle_cost) for j in jobs} == by_job
    assert [j.job_ref for j in jobs] == sorted(by_job, key=lambda ref: (-by_job[ref][0], ref))
    assert {g.key: g.cost for g in users if g.key in by_user} == by_user
