from datetime import timedelta

import pytest
from django.db import connection

from collectors.records import BatchInvalid
from governance.fleet.models import Gpu
from governance.org.models import Project
from governance.usage import services, writer
from governance.usage.models import GpuHour, IngestBatch, Job, JobGpuHour, Sample
from governance.usage.services import BatchConflict, usage_batch_process, usage_batch_receive
from tests.factories import at, batch_body, ingest, job_record, sample_record, series

pytestmark = pytest.mark.django_db


def test_it_turns_a_batch_into_a_job_samples_and_rollups():
    ingest([job_record(), *series(start=at("2026-11-03T09:15:00Z"), minutes=10, sm_util=50.0)])

    job = Job.objects.get()
    assert (job.external_id, job.user_name, job.gpus, job.state) == ("4242", "alice", 1, "running")
    assert job.project.slug == "llm-pretrain" and job.project.team.slug == "nlp"
    assert Sample.objects.count() == 10
    hour = JobGpuHour.objects.get()
    assert hour.hour == at("2026-11-03T09:00:00Z")
    assert (hour.samples, hour.sm_sum, hour.sm_max, hour.idle_samples) == (10, 500.0, 50.0, 0)
    assert GpuHour.objects.get().allocated_samples == 10


def test_it_adds_a_later_batch_to_the_same_rollup_hour():
    start = at("2026-11-03T09:00:00Z")
    ingest(series(start=start, minutes=30, sm_util=10.0))
    ingest(series(start=start + timedelta(minutes=30), minutes=30, sm_util=90.0, mem_used_mib=70000.0))

    hour = JobGpuHour.objects.get()
    assert hour.samples == 60
    assert hour.sm_sum == pytest.approx(30 * 10 + 30 * 90)
    assert (hour.sm_max, hour.mem_used_max) == (90.0, 70000.0)


def test_processing_the_same_batch_twice_changes_nothing():
    batch_id = ingest([job_record(), *series(start=at("2026-11-03T09:15:00Z"), minutes=5)])
    inbox = IngestBatch.objects.get(batch_id=batch_id)

    assert usage_batch_process(inbox_pk=inbox.pk) is None
    assert Sample.objects.count() == 5
    assert JobGpuHour.objects.get().samples == 5


def test_receiving_the_same_batch_id_twice_stores_it_once():
    body = batch_body([job_record()], batch_id="11111111-1111-4111-8111-111111111111")
    first = usage_batch_receive(body=body)
    again = usage_batch_receive(body=body)

    assert (first.duplicate, again.duplicate) == (False, True)
    assert IngestBatch.objects.count() == 1


def test_a_known_batch_id_with_other_records_is_a_conflict():
    usage_batch_receive(body=batch_body([job_record()], batch_id="11111111-1111-4111-8111-111111111111"))

    with pytest.raises(BatchConflict, match="already received with different records"):
        usage_batch_receive(body=batch_body([job_record(user="bob")], batch_id="11111111-1111-4111-8111-111111111111"))


def test_an_invalid_record_rejects_the_whole_batch_and_writes_nothing():
    body = batch_body([job_record(), sample_record(sm_util=140), sample_record(gpu_uuid="")])

    with pytest.raises(BatchInvalid) as caught:
        usage_batch_receive(body=body)

    assert [(e.index, e.field) for e in caught.value.errors] == [(1, "sm_util"), (2, "gpu_uuid")]
    assert IngestBatch.objects.count() == 0 and Job.objects.count() == 0


def test_a_later_job_record_wins_but_never_erases_the_end_time():
    ingest([job_record(end_time="2026-11-03T12:00:00Z", state="completed")])
    ingest([job_record(end_time=None, state="running")])  # replayed older record

    job = Job.objects.get()
    assert job.end_time == at("2026-11-03T12:00:00Z")
    assert job.state == "completed"


def test_a_sample_for_an_unknown_job_creates_a_placeholder_that_the_job_record_fills():
    ingest(series(start=at("2026-11-03T09:15:00Z"), minutes=3, job_id="77"))
    assert Job.objects.get().described is False

    ingest([job_record(job_id="77", gpu_model=None)])
    job = Job.objects.get()
    assert job.described is True
    assert job.gpu_model == "NVIDIA H100 80GB HBM3"  # from its samples
    assert JobGpuHour.objects.get().job == job


def test_a_job_without_gpu_model_takes_it_from_its_samples():
    ingest([job_record(gpu_model=None), sample_record(gpu_model="NVIDIA A100-SXM4-80GB")])

    assert Job.objects.get().gpu_model == "NVIDIA A100-SXM4-80GB"


def test_samples_of_unallocated_gpus_count_in_the_gpu_rollup_only():
    ingest(series(start=at("2026-11-03T09:00:00Z"), minutes=5, job_id=None, sm_util=0.0, mem_used_mib=0.0))

    assert JobGpuHour.objects.count() == 0
    hour = GpuHour.objects.get()
    assert (hour.samples, hour.allocated_samples, hour.idle_samples) == (5, 0, 5)


def test_it_counts_samples_whose_job_cpus_sit_on_another_numa_node():
    ingest(series(start=at("2026-11-03T09:00:00Z"), minutes=4, gpu_numa_node=0, job_cpu_numa_nodes=[1]))

    assert JobGpuHour.objects.get().numa_mismatch_samples == 4


def test_it_records_the_gpu_inventory_from_samples():
    ingest(
        [
            sample_record(gpu_uuid="GPU-a", gpu_index=0),
            sample_record(gpu_uuid="GPU-b", gpu_index=1, mig_profile="1g.10gb"),
        ]
    )

    assert sorted(Gpu.objects.values_list("uuid", "index", "mig_profile")) == [
        ("GPU-a", 0, ""),
        ("GPU-b", 1, "1g.10gb"),
    ]


def test_an_account_without_mapping_or_team_stays_unattributed():
    ingest([job_record(project="unknown-account", team=None)])

    assert Job.objects.get().project is None
    assert not Project.objects.filter(slug="unknown-account").exists()


def test_a_batch_whose_processing_fails_stays_in_the_inbox_with_its_error(monkeypatch):
    receipt = usage_batch_receive(body=batch_body([sample_record()]))
    inbox = IngestBatch.objects.get(batch_id=receipt.batch_id)

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr("governance.usage.writer.samples_write", broken)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            usage_batch_process(inbox_pk=inbox.pk)

    inbox.refresh_from_db()
    assert (inbox.processed_at, inbox.attempts) == (None, 2)
    assert "disk full" in inbox.last_error
    assert Sample.objects.count() == 0
    monkeypatch.undo()
    assert usage_batch_process(inbox_pk=inbox.pk) is not None
    assert Sample.objects.count() == 1


def test_a_deadlocked_batch_is_retried_by_its_task_and_lands_once(monkeypatch):
    from django.db import OperationalError

    from governance.usage import writer
    from governance.usage.tasks import process_batch

    receipt = usage_batch_receive(body=batch_body([sample_record()]))
    inbox = IngestBatch.objects.get(batch_id=receipt.batch_id)
    real, calls = writer.samples_write, []

    def deadlocks_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("deadlock detected")
        return real(*args, **kwargs)

    monkeypatch.setattr("governance.usage.writer.samples_write", deadlocks_once)
    process_batch.apply(args=[inbox.pk], throw=False).get()  # eager: Celery runs the retry in place

    inbox.refresh_from_db()
    assert len(calls) == 2 and inbox.processed_at is not None and inbox.attempts == 2
    assert Sample.objects.count() == 1 and GpuHour.objects.get().samples == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="synchronous_commit is PostgreSQL's")
def test_processing_commits_without_waiting_for_the_wal_flush_but_storing_waits(monkeypatch):
    """A crash can lose a processed batch's writes (the inbox row, still unprocessed, is processed again),
    never a stored batch: `202 Accepted` means durable."""
    seen = {}

    def spy(name, function):
        def wrapped(**kwargs):
            with connection.cursor() as cursor:
                cursor.execute("SHOW synchronous_commit")
                seen[name] = cursor.fetchone()[0]
            return function(**kwargs)

        return wrapped

    monkeypatch.setattr(services, "usage_prepared_write", spy("processing", services.usage_prepared_write))
    monkeypatch.setattr(writer, "inbox_insert", spy("storing", writer.inbox_insert))
    monkeypatch.setattr(services, "_enqueue", lambda inbox_pk: None)
    usage_batch_receive(body=batch_body([job_record(), *series(start=at("2026-11-03T09:15:00Z"), minutes=5)]))
    usage_batch_process(inbox_pk=IngestBatch.objects.get().pk)

    assert seen == {"storing": "on", "processing": "off"}
    assert Sample.objects.count() == 5
    with connection.cursor() as cursor:  # SET LOCAL: the setting ended with the processing transaction
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"
