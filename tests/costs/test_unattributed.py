"""The worklist of GPU-hours billed to no team: largest first, with the mapping that would fix it; mapping one
re-attributes the open month, and a closed month's move lands as corrections."""

from decimal import Decimal

import pytest
import time_machine

from governance.costs.selectors import chargeback_by_team, unattributed
from governance.costs.services import statement_close
from governance.lib.months import Month
from governance.org.models import ProjectMapping
from governance.usage.remap import jobs_remap
from tests.costs.conftest import declare, set_rate
from tests.factories import H100, at, committed, ingest, job_record, series
from tests.invariants import assert_billing_invariants, closed_totals

pytestmark = pytest.mark.django_db
NOV, DEC = Month(2026, 11), Month(2026, 12)


def unmapped_pod():
    """The cluster declares 4 GPUs. A pod of namespace `ml-serving` (no mapping) seen on 2 GPUs for 3 hours,
    and a Slurm job of account `chem`."""
    start = at("2026-11-05T00:00:00Z")
    pod = [
        *series(start=start, minutes=180, every_s=600, job_id="ml-serving/vllm-0", gpu_uuid="GPU-a", gpu_index=0),
        *series(start=start, minutes=180, every_s=600, job_id="ml-serving/vllm-0", gpu_uuid="GPU-b", gpu_index=1),
    ]
    slurm = job_record(
        job_id="991", project="chem", team=None, gpus=1, start_time="2026-11-06T00:00:00Z",
        submit_time="2026-11-06T00:00:00Z", end_time="2026-11-06T01:00:00Z", state="completed",
    )  # fmt: skip
    job = job_record(job_id="ml-serving/vllm-0", project="ml-serving", team=None, gpus=None,
                     submit_time="2026-11-05T00:00:00Z", start_time="2026-11-05T00:00:00Z",
                     end_time="2026-11-05T03:00:00Z", state="completed")  # fmt: skip
    declare(4)
    ingest([job, *pod, slurm], via="api")


@time_machine.travel("2026-11-20T10:00:00Z", tick=False)
def test_the_worklist_lists_what_no_team_was_billed_largest_first_with_the_mapping_kind(cast):
    set_rate(H100, "2.00")
    unmapped_pod()

    rows = unattributed(month=NOV)

    assert [(r.cluster, r.account, r.mapping_kind, r.jobs, r.gpu_hours, r.cost) for r in rows] == [
        ("c1", "ml-serving", "k8s_namespace", 1, Decimal(6), Decimal(12)),
        ("c1", "chem", "slurm_account", 1, Decimal(1), Decimal(2)),
    ]


@time_machine.travel("2026-11-20T10:00:00Z", tick=False)
def test_mapping_a_namespace_bills_its_pod_to_the_team_in_the_open_month(cast):
    set_rate(H100, "2.00")
    unmapped_pod()

    ProjectMapping.objects.create(kind="k8s_namespace", value="ml-serving", project=cast.vision.projects.get())
    with committed():
        jobs_remap(accounts=["ml-serving"])

    assert {c.team: c.cost for c in chargeback_by_team(month=NOV)}["Vision"] == Decimal(12)
    assert [r.account for r in unattributed(month=NOV)] == ["chem"]
    assert_billing_invariants()


def test_mapping_an_account_after_the_close_moves_the_cost_as_corrections(cast):
    with time_machine.travel("2026-11-20T10:00:00Z", tick=False):
        set_rate(H100, "2.00")
        unmapped_pod()
    with time_machine.travel("2026-12-02T10:00:00Z", tick=False):
        statement_close(month=NOV)
        before = closed_totals()
        ProjectMapping.objects.create(kind="slurm_account", value="chem", project=cast.nlp.projects.get())
        with committed():
            jobs_remap(accounts=["chem"])

        december = {c.team: c.cost for c in chargeback_by_team(month=DEC)}
        assert december["NLP"] == Decimal(2)  # the correction of November
        assert_billing_invariants(before)


@time_machine.travel("2026-11-20T10:00:00Z", tick=False)
def test_finance_reads_the_worklist_page_and_api_and_an_engineer_cannot(client, cast):
    set_rate(H100, "2.00")
    unmapped_pod()

    client.force_login(cast.finance)
    page = client.get("/costs/unattributed/", {"month": "2026-11"})
    api = client.get("/api/v1/unattributed/", {"month": "2026-11"})
    client.force_login(cast.alice)
    refused = (
        client.get("/costs/unattributed/").status_code,
        client.get("/api/v1/unattributed/?month=2026-11").status_code,
    )

    assert page.status_code == 200 and b"ml-serving" in page.content and b"Map to a project" in page.content
    assert [(r.account, cost) for r, cost in page.context["rows"]] == [
        ("ml-serving", Decimal("12.00")),
        ("chem", Decimal("2.00")),
    ]
    assert b'id="unattributed-total">14.00 USD' in page.content
    assert [(r["account"], r["cost"]) for r in api.json()["results"]] == [("ml-serving", "12.00"), ("chem", "2.00")]
    assert refused == (403, 403)
