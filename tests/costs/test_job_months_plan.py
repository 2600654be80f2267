"""A pass re-sums its job-months by the (job, day) index, whatever PostgreSQL knows of the ledger.

Short of statistics (a ledger grown since its last ANALYZE, or a month new to them) PostgreSQL took a job-month's
`month =` for a few rows, and read the whole month's index once for every job: a pass over a 25,600-GPU month's
ledger took minutes where it takes seconds. The job-month's rows are read by their days instead."""

from datetime import timedelta

import pytest
from django.db import connection

from benchmarks import pricing as fleet_month
from governance.costs.job_months import REFRESH
from governance.costs.reprice import charges_reprice
from tests.invariants import assert_job_months_equal_ledger, assert_summaries_equal_ledger
from tests.planner import plan, statistics_forgotten

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner"),
    pytest.mark.django_db,
]

GPUS = 2_000
BY_DAYS = (
    "JOIN jobs ON c.job_id = jobs.job_id AND c.day >= jobs.month AND c.day < (jobs.month + interval '1 month')::date"
)


def _sum_scan(explained: str) -> str:
    """The plan's last part: how the job-months' rows are read for their sums."""
    return explained[explained.rindex("CTE Scan on jobs ") :]


def test_a_pass_sums_its_job_months_by_the_job_index_without_statistics():
    month = fleet_month.MONTH
    params = fleet_month._params(GPUS, "plan", month.start, month.end - timedelta(hours=1))
    with connection.cursor() as cursor:
        cursor.execute(fleet_month.FLEET + fleet_month.MONTH_JOBS + fleet_month.ROLLUPS + fleet_month.MARK, params)
    charges_reprice(now=month.end + timedelta(days=1))
    # The month as the pricing bench writes it (rollups without node rollups): of the invariants, the summaries'.
    assert_job_months_equal_ledger()
    assert_summaries_equal_ledger()
    statistics_forgotten("costs_charge")
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM fleet_cluster WHERE name = 'plan'")
        (cluster,) = cursor.fetchone()
    days = [month.start.date() + timedelta(days=d) for d in range(10, 13)]
    keys = {"clusters": [cluster] * len(days), "days": days}
    assert BY_DAYS in " ".join(REFRESH.split())

    read = _sum_scan(plan(REFRESH, keys))

    assert "job_day" in read and "Index Cond: ((job_id = jobs.job_id) AND (day >= jobs.month)" in read, read
    assert "month = jobs.month" not in read and "BitmapAnd" not in read, read
