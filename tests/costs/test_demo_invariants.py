"""The demo month `make run` loads, through the same ingest path: every month reconciles, and a close freezes it."""

import io

import pytest
import time_machine
from django.core.management import call_command

from governance.costs.services import statement_close
from governance.lib.months import Month
from tests.factories import committed
from tests.invariants import assert_billing_invariants, closed_totals, months_billed

pytestmark = pytest.mark.django_db


@time_machine.travel("2026-12-10T12:00:00Z", tick=False)
def test_every_month_of_the_demo_reconciles_and_closing_november_freezes_it():
    with committed():
        call_command("seed_demo", "--gpus", "16", "--days", "35", "--interval", "1800", stdout=io.StringIO())

    assert [str(m) for m in months_billed()] == ["2026-11", "2026-12"]
    assert_billing_invariants()
    statement_close(month=Month(2026, 11))
    assert_billing_invariants(closed_totals())
