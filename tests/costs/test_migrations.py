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


SUMMED, RANKED = ("costs", "0019_ledger_summaries_for_pages"), ("costs", "0020_jobmonth_ranked_reads")


@pytest.mark.django_db(transaction=True)
def test_a_job_month_split_before_job_rows_existed_counts_its_rows():
    executor = MigrationExecutor(connection)
    executor.migrate([SUMMED])
    old = executor.loader.project_state([SUMMED]).apps.get_model("costs", "JobMonth")
    nov, day = date(2026, 11, 1), date(2026, 11, 3)
    for job_id, team in ((1, "NLP"), (1, "NLP Research"), (2, "NLP")):
        old.objects.create(month=nov, job_id=job_id, job_ref=str(job_id), cluster_name="c1", team_name=team,
                           currency="USD", first_day=day, last_day=day, rows=1)  # fmt: skip

    executor = MigrationExecutor(connection)
    executor.migrate([RANKED])
    new = executor.loader.project_state([RANKED]).apps.get_model("costs", "JobMonth")

    assert sorted(new.objects.order_by().values_list("job_id", "team_name", "job_rows")) == [
        (1, "NLP", 2), (1, "NLP Research", 2), (2, "NLP", 1)
    ]  # fmt: skip
    new.objects.all().delete()
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
