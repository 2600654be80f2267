"""The ledger's per-day summary, which the pages read: kept equal to the ledger by the pass that writes it."""

from datetime import UTC, datetime

import pytest
import time_machine
from django.db.models import Sum

from governance.costs.models import Charge, LedgerDay
from governance.costs.selectors import chargeback_by_team
from governance.costs.services import billing_mode_set, statement_close
from governance.lib.months import Month
from tests.costs.conftest import by_team, cents, declare, set_rate
from tests.factories import H100, ingest, job_record
from tests.invariants import assert_billing_invariants, assert_summaries_equal_ledger, closed_totals

pytestmark = pytest.mark.django_db

NOV, DEC = Month(2026, 11), Month(2026, 12)


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def job(job_id: str, start: str, end: str | None, gpus: int = 1, state: str = "completed"):
    return job_record(job_id=job_id, gpus=gpus, start_time=start, submit_time=start, end_time=end, state=state)


def summary(**where) -> dict[tuple[str, str], str]:
    rows = LedgerDay.objects.filter(**where).values("kind", "team_name").annotate(c=Sum("cost"))
    return {(r["kind"], r["team_name"]): cents(r["c"]) for r in rows}


@time_machine.travel("2026-11-05T00:00:00Z", tick=False)
def test_the_summary_holds_a_row_per_team_day_and_model_not_per_job(cast, cluster):
    set_rate(H100, "2.00")
    declare(4)
    ingest([job(str(n), "2026-11-03T00:00:00Z", "2026-11-03T06:00:00Z") for n in range(3)])

    usage = LedgerDay.objects.get(kind="usage", day="2026-11-03")
    assert (usage.team_name, usage.rows, cents(usage.cost), usage.gpu_hours) == ("NLP", 3, cents(36), 18)
    assert summary(day="2026-11-03") == {("usage", "NLP"): cents(36), ("unallocated", "(unallocated)"): cents(156)}
    assert_billing_invariants()


@time_machine.travel("2026-11-05T00:00:00Z", tick=False)
def test_a_job_record_that_moves_its_end_moves_the_summary_with_the_ledger(cast, cluster):
    set_rate(H100, "2.00")
    declare(1)
    ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-03T10:00:00Z")])
    ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-03T04:00:00Z")])

    assert summary(day="2026-11-03") == {("usage", "NLP"): cents(8), ("unallocated", "(unallocated)"): cents(40)}
    assert_billing_invariants()


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_late_usage_for_a_closed_month_lands_in_the_summary_of_the_month_it_corrects_into(cast, cluster):
    set_rate(H100, "2.00")
    declare(2)
    ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-03T02:00:00Z")])
    statement_close(month=NOV, user=cast.finance)
    before = closed_totals()

    ingest([job("2", "2026-11-10T00:00:00Z", "2026-11-10T03:00:00Z")])

    assert summary(kind="adjustment", month=DEC.start.date()) == {
        ("adjustment", "NLP"): cents(6), ("adjustment", "(unallocated)"): cents(-6),
    }  # fmt: skip
    assert by_team(chargeback_by_team(month=DEC))["NLP"] == cents(6)
    assert_billing_invariants(before)


@time_machine.travel("2026-11-05T00:00:00Z", tick=False)
def test_a_change_to_showback_moves_the_summarys_billed_split(cast, cluster):
    set_rate(H100, "2.00")
    declare(1)
    ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-03T04:00:00Z")])

    billing_mode_set(cluster="c1", mode="showback", valid_from=datetime(2026, 11, 1, tzinfo=UTC))

    november = {"day__gte": NOV.start.date()}
    assert not Charge.objects.filter(billed=True, **november).exists()
    assert not LedgerDay.objects.filter(billed=True, **november).exists()
    assert LedgerDay.objects.filter(billed=False, **november).count() == 5  # unallocated 1-4 Nov, usage 3 Nov
    assert_summaries_equal_ledger()
    assert_billing_invariants()


@time_machine.travel("2026-11-05T00:00:00Z", tick=False)
def test_the_check_names_a_ledger_row_the_summary_missed(cast, cluster):
    set_rate(H100, "2.00")
    declare(1)
    ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-03T04:00:00Z")])
    Charge.objects.filter(kind="usage").update(idle_cost=1)  # a write that skipped the pricing pass

    with pytest.raises(AssertionError, match="the summary differs from the ledger"):
        assert_summaries_equal_ledger()
