"""Totals computed by hand here, independently of the code under test."""

from decimal import Decimal

import pytest
import time_machine
from django.core.management import call_command
from django.core.management.base import CommandError

from governance.costs.breakdowns import team_breakdown
from governance.costs.selectors import UNALLOCATED, chargeback_by_team, reconcile
from governance.lib.months import Month
from tests.costs.conftest import A100, by_team, cents, declare, set_rate, share_policy
from tests.factories import H100, at, ingest, job_record, series
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db

NOV = Month(2026, 11)
NOV_HOURS = 30 * 24


def job(**fields):
    return job_record(submit_time=fields.get("start_time", "2026-11-01T00:00:00Z"), state="completed", **fields)


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_a_rate_change_mid_month_prices_each_hour_at_the_rate_in_force(cast, cluster):
    set_rate(H100, "2.00")
    set_rate(H100, "3.00", since="2026-11-15")
    declare(2)
    ingest([job(job_id="1", gpus=1, start_time="2026-11-14T12:00:00Z", end_time="2026-11-15T12:00:00Z")])

    charges = by_team(chargeback_by_team(month=NOV))

    assert charges["NLP"] == cents(12 * 2 + 12 * 3)
    capacity = 2 * (14 * 24 * Decimal("2.00") + 16 * 24 * Decimal("3.00"))
    assert charges[UNALLOCATED] == cents(capacity - 60)
    assert reconcile(month=NOV).ok


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_a_job_across_the_month_end_is_charged_in_each_month_for_its_hours_there(cast, cluster):
    set_rate(H100, "1.50")
    declare(1)
    ingest([job(gpus=1, start_time="2026-11-30T20:00:00Z", end_time="2026-12-01T06:00:00Z")])

    nov, dec = by_team(chargeback_by_team(month=NOV)), by_team(chargeback_by_team(month=NOV.next()))

    assert nov["NLP"] == cents(4 * Decimal("1.50"))
    # December so far: 1 Dec 00:00 to now (2 Dec 10:00) is 34 hours of capacity; the job held 6 of them.
    assert dec["NLP"] == cents(6 * Decimal("1.50"))
    assert dec[UNALLOCATED] == cents(28 * Decimal("1.50"))
    assert reconcile(month=NOV).ok and reconcile(month=NOV.next()).ok


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_a_mig_slice_is_priced_by_its_fraction_of_the_gpu(cast):
    set_rate(A100, "7.00")
    mig = {"gpu_uuid": "MIG-aaaa", "gpu_model": A100, "mig_profile": "1g.10gb", "mem_total_mib": 9728.0,
           "mem_used_mib": 4000.0}  # fmt: skip
    ingest([
        job(gpus=1, gpu_model=A100, start_time="2026-11-05T00:00:00Z", end_time="2026-11-05T10:00:00Z"),
        *series(start=at("2026-11-05T00:00:00Z"), minutes=600, every_s=600, sm_util=50.0, **mig),
    ])  # fmt: skip

    statement = team_breakdown(month=NOV, team_id=cast.nlp.pk)

    # 10 hours of one 1g slice: 10 x 7.00 / 7
    assert cents(statement.cost) == cents(10)
    assert statement.gpu_hours == (Decimal(10) / 7).quantize(Decimal("0.000001"))
    assert list(statement.by_model) == [f"{A100} MIG 1g.10gb"]
    assert cents(statement.used_gpu_hours * 7) == cents(5)  # half the slice's time at 50 % SM
    assert reconcile(month=NOV).ok  # the slice seen by collectors is the capacity: 10 h x 1/7


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_a_job_whose_model_has_no_rate_is_priced_at_the_cluster_default_and_listed(cast, cluster):
    set_rate(H100, "2.00")
    set_rate("*", "1.25", cluster="c1")
    declare(4, model="Mystery GPU")  # billing is bounded by the GPUs that exist
    ingest([job(job_id="77", gpus=4, gpu_model="Mystery GPU", start_time="2026-11-02T00:00:00Z",
                end_time="2026-11-02T05:00:00Z")])  # fmt: skip

    statement = team_breakdown(month=NOV, team_id=cast.nlp.pk)

    assert cents(statement.cost) == cents(4 * 5 * Decimal("1.25"))
    assert statement.at_default_rate == {"77"}


@pytest.fixture
def two_teams(cast, cluster):
    set_rate(H100, "1.00")
    declare(4)
    ingest([
        job(job_id="1", gpus=2, start_time="2026-11-01T00:00:00Z", end_time="2026-11-05T04:00:00Z"),
        job(job_id="2", gpus=1, project="detector", team="vision", start_time="2026-11-10T00:00:00Z",
            end_time="2026-11-14T04:00:00Z"),
    ])  # fmt: skip


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_unallocated_capacity_is_its_own_line_by_default(two_teams):
    charges = by_team(chargeback_by_team(month=NOV))

    # NLP 2 GPUs x 100 h, Vision 1 GPU x 100 h, capacity 4 GPUs x 720 h, all at 1.00
    assert charges == {"NLP": cents(200), "Vision": cents(100), UNALLOCATED: cents(4 * NOV_HOURS - 300)}
    assert reconcile(month=NOV).ok


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_unallocated_capacity_can_be_shared_in_proportion_to_allocated_cost(two_teams):
    share_policy()

    charges = by_team(chargeback_by_team(month=NOV))

    free = Decimal(4 * NOV_HOURS - 300)
    assert charges == {"NLP": cents(200 + free * 2 / 3), "Vision": cents(100 + free / 3)}
    assert sum(charges.values()) == cents(4 * NOV_HOURS)
    assert reconcile(month=NOV).ok


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_reconcile_passes_then_fails_when_a_frozen_charge_is_altered(two_teams, capsys):
    from governance.costs.models import StatementLine

    call_command("close_month", "2026-11")
    call_command("reconcile", "2026-11")
    assert "reconciles to the cent" in capsys.readouterr().out

    line = StatementLine.objects.filter(kind="usage", team_name="NLP").first()
    StatementLine.objects.filter(pk=line.pk).update(cost=line.cost + Decimal("0.01"))

    # The frozen lines no longer add up to the month re-priced under its own terms: reconcile names the cent.
    drift = r"c1: the closed month's frozen lines \+ corrections = 2880.01 USD .*off by 0.01"
    with pytest.raises(CommandError, match=drift):
        call_command("reconcile", "2026-11")


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_a_job_declaring_more_gpus_than_exist_is_billed_what_exists_and_the_rest_is_an_over_claim(cast, cluster):
    from governance.costs.models import OverClaim

    set_rate(H100, "1.00")
    declare(1, since="2026-11-01")
    ingest([job(gpus=2, start_time="2026-11-03T00:00:00Z", end_time="2026-11-03T20:00:00Z")])

    # 2 GPUs x 20 h claimed against 1 GPU: 20 GPU-hours billed, 20 over-claimed, 4 h of the day left unallocated.
    charges = by_team(chargeback_by_team(month=NOV))
    assert charges["NLP"] == cents(20)
    (claim,) = OverClaim.objects.all()
    assert (claim.day.isoformat(), claim.overclaimed_gpu_hours, claim.jobs[0]["job"]) == ("2026-11-03", 20, "4242")
    assert reconcile(month=NOV).ok
    assert_billing_invariants()


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_reconcile_still_names_a_gap_where_a_day_bills_more_than_its_capacity(cast, cluster):
    from governance.costs.models import Charge
    from governance.costs.summaries import ledger_days_rebuild

    set_rate(H100, "1.00")
    declare(1, since="2026-11-01")
    ingest([job(gpus=1, start_time="2026-11-03T00:00:00Z", end_time="2026-11-03T20:00:00Z")])
    Charge.objects.filter(kind="usage").update(gpu_hours=40)  # what no pricing pass writes any more
    ledger_days_rebuild()  # reconcile reads the ledger's per-day sums: a ledger written by hand is summed again

    problems = reconcile(month=NOV).problems

    assert f"c1: {H100} on 2026-11-03 allocated 40.00 GPU-hours but capacity is 24.00 (gap 16.00 GPU-hours)" in problems


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_the_number_of_queries_does_not_grow_with_jobs_or_samples(cast, cluster):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    set_rate(H100, "1.00")
    declare(64)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            chargeback_by_team(month=NOV)
        return len(captured)

    ingest([job(job_id="0", start_time="2026-11-02T00:00:00Z", end_time="2026-11-02T05:00:00Z"),
            *series(start=at("2026-11-02T00:00:00Z"), minutes=60, job_id="0")])  # fmt: skip
    few = queries()
    ingest([job(job_id=str(i), start_time="2026-11-02T00:00:00Z", end_time="2026-11-04T05:00:00Z")
            for i in range(1, 40)] + series(start=at("2026-11-02T00:00:00Z"), minutes=600, job_id="0",
                                            gpu_uuid="GPU-x"))  # fmt: skip

    assert queries() == few
