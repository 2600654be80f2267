"""Data migrations of the costs app: what was there before comes out whole."""

from datetime import date

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE, INVOICES = ("costs", "0009_commitments"), ("costs", "0010_focus_invoice_id")


@pytest.mark.django_db(transaction=True)
def test_a_month_closed_before_invoices_existed_gets_its_invoice():
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    old = executor.loader.project_state([BEFORE]).apps
    old.get_model("costs", "MonthClose").objects.create(month=date(2026, 10, 1), terms={})

    executor = MigrationExecutor(connection)
    executor.migrate([INVOICES])
    new = executor.loader.project_state([INVOICES]).apps
    closed = new.get_model("costs", "MonthClose").objects.get(month=date(2026, 10, 1))

    assert closed.invoice_id == "GG-2026-10-gpu-governance"
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())  # whatever came after, for the tests that follow
