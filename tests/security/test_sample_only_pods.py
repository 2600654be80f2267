"""Replay of issue 25 item 13: a pod `namespace/pod` seen only in samples (its source sends no job record) is
billed to the team its namespace's `k8s_namespace` mapping names, like a described pod, through the real ingest
path and pricing."""

from decimal import Decimal

import pytest
import time_machine

from governance.costs.selectors import chargeback_by_team, unattributed
from governance.lib.months import Month
from governance.org.models import ProjectMapping
from governance.usage.models import Job
from governance.usage.remap import jobs_remap
from tests.costs.conftest import declare, set_rate
from tests.factories import H100, at, committed, ingest, job_record, series
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db
NOV = Month(2026, 11)


def pod_samples(job_id: str = "ml-serving/vllm-0") -> list[dict]:
    """The pod on 2 GPUs for 3 hours, from dcgm-exporter's pod/namespace labels only."""
    start = at("2026-11-05T00:00:00Z")
    return [
        *series(start=start, minutes=180, every_s=600, job_id=job_id, gpu_uuid="GPU-a", gpu_index=0),
        *series(start=start, minutes=180, every_s=600, job_id=job_id, gpu_uuid="GPU-b", gpu_index=1),
    ]


def billed() -> dict[str, Decimal]:
    return {c.team: c.cost for c in chargeback_by_team(month=NOV)}


@time_machine.travel("2026-11-20T10:00:00Z", tick=False)
def test_it_bills_a_sample_only_pod_to_the_team_its_namespace_mapping_names(cast):
    set_rate(H100, "2.00")
    declare(4)
    ProjectMapping.objects.create(kind="k8s_namespace", value="ml-serving", project=cast.vision.projects.get())

    ingest(pod_samples(), via="api")

    job = Job.objects.get(external_id="ml-serving/vllm-0")
    assert (job.described, job.account, job.project.team.slug) == (False, "ml-serving", "vision")
    assert billed()["Vision"] == Decimal(12)  # 2 GPUs x 3 h x 2.00
    assert unattributed(month=NOV) == []
    assert_billing_invariants()


@time_machine.travel("2026-11-20T10:00:00Z", tick=False)
def test_it_moves_a_sample_only_pod_to_the_team_once_its_namespace_is_mapped(cast):
    set_rate(H100, "2.00")
    declare(4)
    ingest(pod_samples(), via="api")
    assert [(r.account, r.mapping_kind, r.cost) for r in unattributed(month=NOV)] == [
        ("ml-serving", "k8s_namespace", Decimal(12))
    ]

    ProjectMapping.objects.create(kind="k8s_namespace", value="ml-serving", project=cast.nlp.projects.get())
    with committed():
        jobs_remap(accounts=["ml-serving"])

    assert billed()["NLP"] == Decimal(12)
    assert unattributed(month=NOV) == []
    assert_billing_invariants()


@time_machine.travel("2026-11-20T10:00:00Z", tick=False)
def test_a_job_record_for_the_pod_still_decides_its_project(cast):
    set_rate(H100, "2.00")
    declare(4)
    ProjectMapping.objects.create(kind="k8s_namespace", value="ml-serving", project=cast.vision.projects.get())
    ingest(pod_samples(), via="api")

    record = job_record(job_id="ml-serving/vllm-0", project="llm-pretrain", team=None, gpus=None,
                        submit_time="2026-11-05T00:00:00Z", start_time="2026-11-05T00:00:00Z",
                        end_time="2026-11-05T03:00:00Z", state="completed")  # fmt: skip
    ingest([record], via="api")

    assert billed()["NLP"] == Decimal(12) and "Vision" not in billed()
    assert_billing_invariants()


@time_machine.travel("2026-11-20T10:00:00Z", tick=False)
def test_a_sample_only_slurm_job_stays_unattributed(cast):
    set_rate(H100, "2.00")
    declare(4)
    ProjectMapping.objects.create(kind="k8s_namespace", value="4242", project=cast.vision.projects.get())

    ingest(pod_samples(job_id="4242"), via="api")

    assert Job.objects.get(external_id="4242").project is None
    assert [r.cost for r in unattributed(month=NOV)] == [Decimal(12)]
    assert_billing_invariants()
