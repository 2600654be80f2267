"""Issue 33: usage rows priced before the ledger kept a job's share (costs 0017) get it back where the month is open
(costs 0018 marks their days; the worker re-prices them); a closed month's frozen lines never move."""

from decimal import Decimal

import pytest
import time_machine
from django.db.models import Sum

from governance.costs.backfill import gpu_share_marks
from governance.costs.models import Charge, LedgerDay, MonthClose, StatementLine
from governance.costs.reprice import charges_reprice
from governance.costs.services import statement_close
from governance.lib.months import Month
from governance.usage.models import PricingMark
from tests.costs.conftest import declare, set_rate
from tests.factories import H100, committed, ingest, job_record
from tests.invariants import assert_billing_invariants, closed_totals

pytestmark = pytest.mark.django_db


def pod(job_id: str, day: str, gpus: float) -> dict:
    return job_record(job_id=job_id, submit_time=f"{day}T00:00:00Z", start_time=f"{day}T00:00:00Z",
                      end_time=f"{day}T04:00:00Z", state="completed", gpus=gpus)  # fmt: skip


def shares(month: str) -> set:
    return set(Charge.objects.filter(kind="usage", day__startswith=month).values_list("job_ref", "gpu_share"))


def test_open_days_of_pods_priced_without_their_share_are_re_priced_with_it_and_closed_months_stay(cast):
    set_rate(H100, "2.00")
    declare(2)
    with time_machine.travel("2026-11-04T00:00:00Z", tick=False):
        ingest([pod("oct-pod", "2026-10-20", 0.25), pod("nov-pod", "2026-11-02", 0.25), pod("whole", "2026-11-02", 1)])
    with time_machine.travel("2026-11-04T01:00:00Z", tick=False), committed():
        statement_close(month=Month(2026, 10))

    # The ledger as a release before gpu_share left it: no share on usage rows, frozen lines or the day summaries.
    Charge.objects.update(gpu_share=None)
    StatementLine.objects.update(gpu_share=None)
    LedgerDay.objects.update(shared_cost=0, shared_gpu_hours=0)
    before = closed_totals()
    assert_billing_invariants()

    with time_machine.travel("2026-11-04T02:00:00Z", tick=False):
        # One job-day (the November pod's) and its cluster-day; nothing of closed October, nothing for whole GPUs.
        assert gpu_share_marks(charge=Charge, month_close=MonthClose, pricing_mark=PricingMark) == 2
        assert set(PricingMark.objects.values_list("job__external_id", "day__month")) == {("nov-pod", 11), (None, 11)}
        charges_reprice()

        assert shares("2026-11") == {("nov-pod", Decimal("0.25")), ("whole", None)}
        # 4 h x 0.25 = 1 GPU-hour of share at 2.00: the team month says it again.
        nov = LedgerDay.objects.filter(day__month=11).aggregate(c=Sum("shared_cost"), h=Sum("shared_gpu_hours"))
        assert (nov["c"], nov["h"]) == (Decimal(2), Decimal(1))
        # October is closed: its rows and frozen lines keep what they said, and its bill does not move by a cent.
        assert shares("2026-10") == {("oct-pod", None)}
        assert not StatementLine.objects.filter(gpu_share__isnull=False).exists()
        assert closed_totals() == before
        assert_billing_invariants(before)
        # Run again (a second migrate on a copy): nothing left to mark.
        assert gpu_share_marks(charge=Charge, month_close=MonthClose, pricing_mark=PricingMark) == 0
