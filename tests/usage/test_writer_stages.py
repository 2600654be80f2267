"""What the usage writer leaves behind, seen through its public entry points (the ingest service, the worker task,
`manage.py import_usage`): jobs, GPUs and samples, and the bill they make. Nothing here imports writer internals."""

import json
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command

from governance.costs.selectors import chargeback_by_team
from governance.fleet.models import Cluster, Gpu
from governance.lib.months import Month
from governance.usage.models import IngestBatch, Job, Sample
from governance.usage.services import usage_batch_receive
from governance.usage.tasks import process_batch
from tests.costs.conftest import by_team, cents, declare, set_rate
from tests.factories import H100, at, batch_body, committed, ingest, job_record, sample_record, series
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db

NOV = Month(2026, 11)


@pytest.fixture(autouse=True)
def _the_day_after():
    with time_machine.travel("2026-11-04T00:00:00Z", tick=False):
        yield


def job_of(**fields):
    return job_record(submit_time=fields["start_time"], **fields)


@pytest.fixture
def priced_cluster(cast):
    Cluster.objects.create(name="c1")
    set_rate(H100, "2.00")
    declare(8)


def test_a_scheduler_batch_with_no_samples_creates_the_job_and_bills_its_declared_gpus(priced_cluster):
    ingest([job_of(job_id="50", gpus=2, start_time="2026-11-03T00:00:00Z", end_time="2026-11-03T02:00:00Z",
                       state="completed")], via="api")  # fmt: skip

    job = Job.objects.get(external_id="50")
    assert (job.gpus, job.state, job.team_name) == (2, "completed", "nlp")
    assert not Gpu.objects.exists()
    # 2 GPUs x 2 h x 2.00
    assert by_team(chargeback_by_team(month=NOV))["NLP"] == cents(8)
    assert_billing_invariants()


@pytest.mark.parametrize("unknown", [None, 0], ids=["null", "zero"])
def test_a_later_record_that_does_not_know_the_gpu_count_keeps_the_known_count_and_the_bill(priced_cluster, unknown):
    ingest([job_of(job_id="51", gpus=4, start_time="2026-11-03T00:00:00Z")])

    # sacct on a cluster without gres/gpu accounting reports the end, but not the count.
    ingest([job_of(job_id="51", gpus=unknown, start_time="2026-11-03T00:00:00Z", end_time="2026-11-03T02:00:00Z",
                       state="completed")])  # fmt: skip

    job = Job.objects.get(external_id="51")
    assert (job.gpus, job.state, job.end_time) == (4, "completed", at("2026-11-03T02:00:00Z"))
    # 4 GPUs x 2 h x 2.00
    assert by_team(chargeback_by_team(month=NOV))["NLP"] == cents(16)
    assert_billing_invariants()


def test_a_job_record_with_no_model_takes_the_model_its_samples_ran_on(priced_cluster):
    samples = series(start=at("2026-11-03T00:00:00Z"), minutes=60, every_s=300, job_id="52", gpu_model=H100)
    ingest([job_of(job_id="52", gpu_model=None, gpus=1, start_time="2026-11-03T00:00:00Z",
                       end_time="2026-11-03T01:00:00Z", state="completed"), *samples])  # fmt: skip

    job = Job.objects.get(external_id="52")
    assert job.gpu_model == H100
    assert Sample.objects.filter(job=job).count() == 12
    assert Gpu.objects.get().model == H100
    assert by_team(chargeback_by_team(month=NOV))["NLP"] == cents(2)


def test_the_worker_task_processes_a_batch_once_however_often_it_runs(priced_cluster):
    records = [job_of(job_id="53", gpus=1, start_time="2026-11-03T00:00:00Z", end_time="2026-11-03T01:00:00Z",
                          state="completed"),
               *series(start=at("2026-11-03T00:00:00Z"), minutes=60, every_s=600, job_id="53")]  # fmt: skip
    with committed():
        receipt = usage_batch_receive(body=batch_body(records))
    inbox = IngestBatch.objects.get(batch_id=receipt.batch_id)

    with committed():
        process_batch(inbox.pk)  # a redelivered task, after the first run
        process_batch(inbox.pk)

    inbox.refresh_from_db()
    assert inbox.processed_at is not None and inbox.attempts == 1
    assert Sample.objects.count() == 6
    assert by_team(chargeback_by_team(month=NOV))["NLP"] == cents(2)


def test_a_later_sample_moves_a_gpu_to_another_node_and_keeps_when_it_was_first_seen(priced_cluster):
    ingest([sample_record(ts="2026-11-03T00:00:00Z", node="gpu-017", gpu_index=0, job_id=None)])
    ingest([sample_record(ts="2026-11-03T05:00:00Z", node="gpu-018", gpu_index=3, job_id=None, mem_total_mib=None)])
    ingest([sample_record(ts="2026-11-03T01:00:00Z", node="gpu-019", gpu_index=5, job_id=None)])  # replayed, older

    gpu = Gpu.objects.select_related("node").get()
    assert (gpu.node.name, gpu.index, gpu.memory_total_mib) == ("gpu-018", 3, 81559.0)
    assert (gpu.first_seen_at, gpu.last_seen_at) == (at("2026-11-03T00:00:00Z"), at("2026-11-03T05:00:00Z"))


def test_import_usage_writes_the_jobs_and_samples_of_a_file_and_a_second_import_adds_nothing(priced_cluster,
                                                                                          tmp_path):  # fmt: skip
    records = [job_of(job_id="54", gpus=1, start_time="2026-11-03T00:00:00Z", end_time="2026-11-03T03:00:00Z",
                          state="completed"),
               *series(start=at("2026-11-03T00:00:00Z"), minutes=180, every_s=900, job_id="54")]  # fmt: skip
    path = tmp_path / "usage.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))

    for _ in range(2):
        with committed():
            call_command("import_usage", str(path), stdout=StringIO())

    assert Sample.objects.count() == 12
    assert by_team(chargeback_by_team(month=NOV))["NLP"] == cents(6)
    assert_billing_invariants()


def test_a_replayed_older_running_record_never_reopens_a_job_that_has_ended(priced_cluster):
    running = job_of(job_id="55", gpus=1, start_time="2026-11-03T00:00:00Z", end_time=None, state="running")
    ingest([job_of(job_id="55", gpus=1, start_time="2026-11-03T00:00:00Z", end_time="2026-11-03T02:00:00Z",
                   state="completed")])  # fmt: skip

    ingest([running])  # a collector's spool delivers the older record late

    job = Job.objects.get(external_id="55")
    assert (job.state, job.end_time) == ("completed", at("2026-11-03T02:00:00Z"))
    # Billed to its end, not up to now: 1 GPU x 2 h x 2.00.
    assert by_team(chargeback_by_team(month=NOV))["NLP"] == cents(4)
    assert_billing_invariants()


def test_a_job_cancelled_while_pending_stays_cancelled_when_the_older_pending_record_arrives(priced_cluster):
    pending = job_record(job_id="56", gpus=1, submit_time="2026-11-03T00:00:00Z", start_time=None, state="pending")
    ingest([{**pending, "state": "cancelled"}])

    ingest([pending])

    job = Job.objects.get(external_id="56")
    assert (job.state, job.start_time) == ("cancelled", None)
    assert "NLP" not in by_team(chargeback_by_team(month=NOV))
