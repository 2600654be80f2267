"""A findings pass reads each chunk's findings by the job index, even from a findings table PostgreSQL has no
statistics for yet (a new install's first pass, or findings written in the pass's own transaction).

Without statistics PostgreSQL guesses 0.5% of a table per id of an `IN` list: for a chunk of 200 ids the whole
table, which it then read whole for every chunk (a 25,600-job pass spent a fifth of its time there)."""

from datetime import timedelta

import pytest
from django.db import connection

from benchmarks import pricing as fleet_month
from governance.efficiency.models import Finding
from governance.efficiency.services import CHUNK, _findings_of
from governance.usage.models import Job
from tests.planner import plan, statistics_forgotten

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner"),
    pytest.mark.django_db,
]

JOBS = 20_000


def test_a_chunk_of_a_large_pass_reads_its_findings_by_the_job_index():
    month = fleet_month.MONTH
    params = fleet_month._params(JOBS, "plan", month.start, month.end - timedelta(hours=1))
    with connection.cursor() as cursor:
        cursor.execute(fleet_month.FLEET + fleet_month.MONTH_JOBS, params)
    ids = list(Job.objects.order_by("pk").values_list("pk", flat=True))
    assert len(ids) == JOBS
    Finding.objects.bulk_create(
        [Finding(job_id=pk, rule="idle_gpu", severity="warning", evidence={}, advice="") for pk in ids],
        batch_size=5000,
    )
    statistics_forgotten("efficiency_finding")
    chunk = ids[JOBS // 2 : JOBS // 2 + CHUNK]

    read = plan(*_findings_of(chunk).query.sql_with_params())
    bare = plan(*Finding.objects.filter(job_id__in=chunk).order_by("job_id", "rule", "-id").query.sql_with_params())

    assert "Seq Scan on efficiency_finding" in bare  # the guess the range is there for
    assert "Seq Scan" not in read and "efficiency_finding_job_id" in read, read
    assert [f.job_id for f in _findings_of(chunk)] == chunk  # and it reads the same findings
