"""The demo month `make run` loads, through the same ingest path: every month reconciles, and a close freezes it."""

import io

import pytest
import time_machine
from django.core.management import call_command

from governance.costs.models import Charge, OverClaim
from governance.costs.services import statement_close
from governance.lib.months import Month
from tests.factories import committed
from tests.invariants import assert_billing_invariants, closed_totals, months_billed

pytestmark = pytest.mark.django_db


@time_machine.travel("2026-12-10T12:00:00Z", tick=False)
def test_every_month_of_the_demo_reconciles_records_no_over_claim_and_closing_november_freezes_it():
    with committed():
        call_command("seed_demo", "--gpus", "16", "--days", "35", "--interval", "1800", stdout=io.StringIO())

    assert [str(m) for m in months_billed()] == ["2026-11", "2026-12"]
    # No record of the demo claims a GPU that does not exist: jobs starting or ending between two samples, and jobs
    # already running when the history begins, are billed in full and claim nothing beyond the fleet.
    assert not OverClaim.objects.exists()
    assert Charge.objects.filter(kind=Charge.Kind.USAGE).count() > 100
    assert_billing_invariants()
    statement_close(month=Month(2026, 11))
    assert_billing_invariants(closed_totals())
