"""The worker's periodic pricing: a running job's charge follows the clock, a pass out of time hands the rest on,
and the budget check with no budget set sends nothing."""

from datetime import date

import pytest
import time_machine

from governance.costs import tasks
from governance.costs.claims import marks_claim
from governance.costs.marks import running_jobs_mark
from governance.costs.models import Anomaly, Charge
from governance.costs.reprice import charges_reprice
from governance.costs.selectors import chargeback_by_team
from governance.lib.months import Month
from governance.usage.models import PricingMark
from tests.costs.conftest import by_team, cents, declare, set_rate
from tests.factories import H100, ingest, job_record
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db

DEC = Month(2026, 12)


@pytest.fixture
def running_job(cast, cluster):
    """A 2-GPU NLP job running since 22:00 on December 3, on a cluster of 4 GPUs at 2.00."""
    set_rate(H100, "2.00")
    declare(4, since="2026-12-01")
    with time_machine.travel("2026-12-03T23:00:00Z", tick=False):
        ingest([job_record(job_id="7", gpus=2, submit_time="2026-12-03T22:00:00Z", start_time="2026-12-03T22:00:00Z",
                           end_time=None, state="running")])  # fmt: skip


def test_the_periodic_pass_charges_a_running_job_up_to_now(running_job):
    for now in ("2026-12-04T00:10:00Z", "2026-12-04T10:00:00Z"):  # it runs every minute; two of those runs
        with time_machine.travel(now, tick=False):
            tasks.reprice_running()
            nlp = by_team(chargeback_by_team(month=DEC))["NLP"]

    # 2 GPUs from 22:00 to 10:00 the next day: 24 GPU-hours at 2.00.
    assert nlp == cents(48)


def test_just_after_midnight_the_periodic_pass_also_finishes_yesterday(running_job):
    with time_machine.travel("2026-12-04T00:10:00Z", tick=False):
        tasks.reprice_running()
        december = by_team(chargeback_by_team(month=DEC))
        # December 3 is charged to its end (2 GPUs x 2 h), December 4 for its first ten minutes.
        assert december["NLP"] == cents("8.67")
        assert_billing_invariants()


def test_a_pass_that_runs_out_of_time_leaves_the_marks_and_says_so(running_job):
    with time_machine.travel("2026-12-04T10:00:00Z", tick=False):
        running_jobs_mark()
        done = charges_reprice(budget_s=-1)

    assert done.more and done.job_days == 0
    assert PricingMark.objects.exists()


def test_the_reprice_task_hands_what_is_left_to_a_new_task(running_job, monkeypatch):
    handed: list[str] = []
    monkeypatch.setattr(tasks, "REPRICE_BUDGET_S", -1)
    monkeypatch.setattr(tasks, "enqueue", handed.append)

    with time_machine.travel("2026-12-04T10:00:00Z", tick=False):
        tasks.reprice_running()

    assert handed == ["costs.reprice"]
    assert PricingMark.objects.exists()


def test_the_budget_check_sends_nothing_when_no_budget_is_set(running_job):
    with time_machine.travel("2026-12-04T10:00:00Z", tick=False):
        assert tasks.check_budgets() == 0


def test_the_reprice_task_out_of_time_hands_the_marks_left_to_a_new_task(running_job, monkeypatch):
    handed: list[str] = []
    monkeypatch.setattr(tasks, "REPRICE_BUDGET_S", -1)
    monkeypatch.setattr(tasks, "enqueue", handed.append)
    with time_machine.travel("2026-12-04T10:00:00Z", tick=False):
        running_jobs_mark()

        assert tasks.reprice_marked() == 0

    assert handed == ["costs.reprice"]


def test_the_hourly_anomaly_task_flags_a_jump_in_a_teams_spend_once(cast, cluster):
    set_rate(H100, "10.00")
    declare(16, since="2026-11-01")
    ingest([job_record(job_id=f"d{day}", gpus=12 if day == 15 else 1, submit_time=f"2026-11-{day:02d}T00:00:00Z",
                       start_time=f"2026-11-{day:02d}T00:00:00Z", end_time=f"2026-11-{day + 1:02d}T00:00:00Z",
                       state="completed") for day in range(1, 16)])  # fmt: skip

    with time_machine.travel("2026-11-16T06:00:00Z", tick=False):
        first, again = tasks.detect_anomalies(), tasks.detect_anomalies()

    # 120.00 a day for two weeks, then 1,440.00: NLP's spend and GPU-hours, and its project's.
    assert Anomaly.objects.filter(team=cast.nlp, metric="spend", day="2026-11-15").exists()
    assert first == Anomaly.objects.count() >= 1 and again == 0


def test_a_claim_takes_the_rest_of_the_last_cluster_day_it_reached(cluster):
    days = [date(2026, 12, 1), date(2026, 12, 2)]
    PricingMark.objects.bulk_create([PricingMark(cluster_id=cluster.pk, day=d) for d in days for _ in range(3)])

    first = marks_claim(limit=2)
    second = marks_claim(limit=2)
    last = marks_claim(limit=2)

    assert [d for _, _, d in first.marks] == [days[0]] * 3 and first.more
    assert [d for _, _, d in second.marks] == [days[1]] * 3 and second.more
    assert last.marks == [] and not last.more


def test_a_pass_claims_pricing_claim_marks_marks(cluster, monkeypatch, settings):
    from governance.costs import reprice

    limits: list[int] = []

    def claimed(limit: int):
        limits.append(limit)
        return marks_claim(limit)

    monkeypatch.setattr(reprice, "marks_claim", claimed)
    days = [date(2026, 12, 1), date(2026, 12, 2)]
    PricingMark.objects.bulk_create([PricingMark(cluster_id=cluster.pk, day=d) for d in days for _ in range(3)])
    settings.PRICING_CLAIM_MARKS = 2

    with time_machine.travel("2026-12-04T10:00:00Z", tick=False):
        done = charges_reprice()

    # Two passes of a whole cluster-day each (the limit reached inside the day), and one that found none.
    assert limits == [2, 2, 2] and done.cluster_days >= 2 and not PricingMark.objects.exists()
    assert_billing_invariants()


def test_passes_of_part_of_a_day_price_the_ledger_a_single_pass_prices(running_job):
    with time_machine.travel("2026-12-04T10:00:00Z", tick=False):
        ingest([job_record(job_id=str(n), gpus=1, submit_time="2026-12-03T22:00:00Z", start_time="2026-12-03T22:00:00Z",
                           end_time=None, state="running") for n in range(8, 10)])  # fmt: skip
        running_jobs_mark()
        charges_reprice(limit=1)
        small = sorted(Charge.objects.values_list("kind", "day", "job_id", "gpu_hours", "cost"), key=str)
        running_jobs_mark()
        charges_reprice()
        whole = sorted(Charge.objects.values_list("kind", "day", "job_id", "gpu_hours", "cost"), key=str)

    assert small == whole and small
    assert_billing_invariants()
