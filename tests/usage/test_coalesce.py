"""Small batches written together: a worker that takes a small batch on its first attempt also takes the small
batches of the same token waiting behind it and writes them in one transaction (PostgreSQL). What it writes is
what each batch written alone in turn writes: samples, rollups, jobs and their history, GPU facts, pricing marks and
the ledger priced from them. A group that fails writes nothing; its leader is written alone at once and the others
by their own tasks, never in a group again."""

from datetime import timedelta

import psycopg
import pytest
from django.db import connection, transaction

from governance.api.models import AuditEntry
from governance.api.services import api_token_create
from governance.costs.models import Charge
from governance.costs.reprice import charges_reprice
from governance.fleet.models import Gpu, Node
from governance.usage import services, writer
from governance.usage.models import (
    GpuHour,
    IngestBatch,
    Job,
    JobChange,
    JobGpuHour,
    NodeDay,
    NodeHour,
    PricingMark,
    Sample,
)
from governance.usage.services import usage_batch_process, usage_batch_receive
from governance.usage.writer.inbox import ATTEMPT_UNFINISHED, GROUP_LOCK_SPACE
from tests.costs.conftest import declare, set_rate
from tests.factories import H100, at, batch_body, iso, job_record, sample_record
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="batches are written together on PostgreSQL")

START = at("2026-11-03T22:40:00Z")  # the samples cross midnight: two days of marks and ledger
NODES = {"n0": ("GPU-a0", "GPU-a1"), "n1": ("GPU-b0", "GPU-b1"), "n2": ("GPU-c0", "GPU-c1")}
JOB_OF = {"n0": "a", "n1": "b", "n2": None}  # node n2's GPUs hold no job (unallocated), until the pod comes


def _node_batch(node: str, step: int, **overrides) -> list[dict]:
    """One node agent's interval: a sample of each of its GPUs."""
    ts = iso(START + step * timedelta(minutes=10))
    job = JOB_OF[node]
    if node == "n2" and step >= 4:
        job = "ns-infer/pod-1"  # a pod no record describes: attributed by its namespace
    records = [
        sample_record(
            node=node, gpu_uuid=uuid, gpu_index=i, ts=ts, job_id=job, sm_util=(7.0 * step + i) % 100, **overrides
        )
        for i, uuid in enumerate(NODES[node])
    ]
    if node == "n0" and step >= 6:  # GPU-a1 moved to node n1
        records[1] |= {"node": "n1", "gpu_index": 2, "gpu_numa_node": 1}
    return records


def _bodies() -> list[bytes]:
    """Node agents' batches over 8 intervals, with what happens between them: the jobs' records (one batch), a
    job's earlier start and its end arriving later, a reading sent twice in one batch, a spool replayed under a
    new batch id, a GPU moved to another node, and one batch too large to go in a group."""
    bodies = []
    for step in range(8):
        for node in NODES:
            records = _node_batch(node, step)
            if node == "n1" and step == 5:
                records.append(records[0])  # twice in one batch
            bodies.append(batch_body(records))
        if step == 1:
            bodies.append(batch_body([
                job_record(job_id="a", gpus=2, start_time=iso(START - timedelta(hours=1)), end_time=None),
                job_record(job_id="b", gpus=2, team="vision", project="detector",
                           start_time=iso(START - timedelta(hours=2)), end_time=None),
            ]))  # fmt: skip
        if step == 3:
            bodies.append(batch_body(_node_batch("n0", 2)))  # the spool of step 2, sent again
        if step == 6:
            ended = iso(START + timedelta(minutes=75))
            bodies.append(batch_body([job_record(job_id="b", gpus=2, team="vision", project="detector",
                                                 start_time=iso(START - timedelta(hours=3)), end_time=ended,
                                                 state="completed")]))  # fmt: skip
    large = [r for step in range(8, 12) for node in NODES for r in _node_batch(node, step)]
    bodies.append(batch_body(large))  # 24 records: more than the test's group of INGEST_COALESCE_RECORDS has room for
    return bodies


def _stored(bodies: list[bytes], token_id: int | None) -> list[int]:
    pks = []
    for body in bodies:
        receipt = usage_batch_receive(body=body, token_id=token_id)
        pks.append(IngestBatch.objects.get(batch_id=receipt.batch_id).pk)
    return pks


def _state() -> dict[str, list]:
    """What the writes left, by natural keys (ids differ between two runs)."""
    hour_fields = [f.name for f in JobGpuHour._meta.concrete_fields if f.name not in ("id", "job", "gpu")]
    gpu_hour_fields = [f.name for f in GpuHour._meta.concrete_fields if f.name not in ("id", "gpu")]
    sample_fields = [f.name for f in Sample._meta.concrete_fields if f.name not in ("id", "gpu", "job")]
    node_fields = [f.name for f in NodeHour._meta.concrete_fields if f.name not in ("id", "node")]
    day_fields = [f.name for f in NodeDay._meta.concrete_fields if f.name not in ("id", "node")]
    job_fields = ["external_id", "gpu_model", "start_time", "end_time", "state", "account", "project__slug", "gpus",
                  "user_name", "described", "source_token__name"]  # fmt: skip
    gpu_fields = ["uuid", "node__name", "index", "model", "memory_total_mib", "numa_node", "mig_profile",
                  "first_seen_at", "last_seen_at", "introduced_by__name"]  # fmt: skip

    def rows(queryset, *fields) -> list:
        return sorted(queryset.values_list(*fields), key=repr)

    return {
        "samples": rows(Sample.objects, "gpu__uuid", "job__external_id", *sample_fields),
        "job_hours": rows(JobGpuHour.objects, "job__external_id", "gpu__uuid", *hour_fields),
        "gpu_hours": rows(GpuHour.objects, "gpu__uuid", *gpu_hour_fields),
        "node_hours": rows(NodeHour.objects, "node__name", *node_fields),
        "node_days": rows(NodeDay.objects, "node__name", *day_fields),
        "jobs": rows(Job.objects, *job_fields),
        "gpus": rows(Gpu.objects, *gpu_fields),
        "nodes": rows(Node.objects, "name"),
        "marks": sorted(set(PricingMark.objects.values_list("job__external_id", "cluster__name", "day")), key=repr),
        "job_changes": rows(
            JobChange.objects, "job__external_id", "field", "old_value", "new_value", "door", "token_name"
        ),
    }


def _ledger() -> list[tuple]:
    fields = ("kind", "job_ref", "day", "team_name", "gpu_model", "gpu_hours", "cost", "idle_cost")
    return sorted(Charge.objects.values_list(*fields), key=repr)


def _written(settings, bodies: list[bytes], token_id: int, *, together: bool) -> tuple[list, dict, list, list]:
    """Store the batches, process them in the order they arrived (one task each), price; what it left, then
    rolled back."""
    settings.INGEST_COALESCE_BATCHES = 32 if together else 1
    with transaction.atomic():
        pks = _stored(bodies, token_id)
        results = [usage_batch_process(inbox_pk=pk) for pk in pks]
        state = _state()
        charges_reprice()
        assert_billing_invariants()
        ledger = _ledger()
        doors = sorted(AuditEntry.objects.filter(model="usage.job").values_list("object_repr", "where", "token_name"))
        transaction.set_rollback(True)
    return results, state, ledger, doors


@pytest.fixture
def token_id(cast, monkeypatch, settings) -> int:
    monkeypatch.setattr(services, "_enqueue", lambda inbox_pk: None)  # each batch's task is run by the test
    settings.INGEST_COALESCE_RECORDS = 60  # the small batches' 54 records, not the large batch's 24 too
    set_rate(H100, "2.00")
    declare(6, since="2026-11-01")
    return api_token_create(user=cast.admin, name="agents", scope="ingest", clusters=["c1"])[0].pk


def test_small_batches_written_together_leave_what_each_written_alone_leaves(settings, token_id):
    bodies = _bodies()
    results, together, ledger_together, doors_together = _written(settings, bodies, token_id, together=True)
    alone_results, alone, ledger_alone, doors_alone = _written(settings, bodies, token_id, together=False)

    # Together: the first batch took every small batch behind it; the rest found theirs written; the large batch
    # went alone. Alone: one batch a task.
    assert [r.batches for r in results if r is not None] == [len(results) - 1, 1]
    assert all(r is not None and r.batches == 1 for r in alone_results)
    assert sum(r.samples for r in results if r is not None) == sum(r.samples for r in alone_results)

    for table in alone:
        assert together[table] == alone[table], table
    assert ledger_together == ledger_alone and any(kind == "usage" for kind, *_ in ledger_alone)
    assert doors_together == doors_alone and doors_alone  # each job change through the door of its own batch
    # What the cases above must have exercised, so the comparison means something.
    assert len(alone["samples"]) == 8 * 6 + 4 * 6  # the replayed spool and the repeat counted once
    assert {(uuid, node) for uuid, node, *_ in alone["gpus"]} >= {("GPU-a1", "n1")}  # the move, latest facts won
    assert ("ns-infer/pod-1", H100) in {(j[0], j[1]) for j in alone["jobs"]}
    assert any(field == "start_time" for _, field, *_ in alone["job_changes"])


def test_a_job_changed_in_a_group_is_on_record_through_its_own_batchs_door(settings, token_id):
    settings.INGEST_COALESCE_BATCHES = 32
    bodies = _bodies()
    pks = _stored(bodies, token_id)
    ending = next(pk for pk, body in zip(pks, bodies, strict=True) if b'"completed"' in body)

    usage_batch_process(inbox_pk=pks[0])

    assert not IngestBatch.objects.filter(pk=ending, processed_at__isnull=True).exists()
    batch_id = IngestBatch.objects.get(pk=ending).batch_id
    entry = AuditEntry.objects.get(model="usage.job", changes__has_key="start_time")
    assert (entry.door, entry.where, entry.token_name) == ("ingest", f"batch {batch_id}", "agents")
    assert JobChange.objects.get(field="start_time").token_id == token_id


def test_a_group_that_fails_writes_nothing_its_leader_goes_alone_and_the_others_alone_after(settings, token_id):
    settings.INGEST_COALESCE_BATCHES = 4
    pks = _stored(_bodies()[:6], token_id)
    # The third batch's stored body is unreadable: any write that includes it fails.
    IngestBatch.objects.filter(pk=pks[2]).update(body=b"garbage")

    first = usage_batch_process(inbox_pk=pks[0])

    assert first is not None and first.batches == 1  # the group failed; the leader went alone
    batches = {b.pk: b for b in IngestBatch.objects.filter(pk__in=pks)}
    assert batches[pks[0]].processed_at is not None and batches[pks[0]].attempts == 1
    for pk in pks[1:4]:  # the group's others: their attempt counted, the failure said, left for their tasks
        assert batches[pk].processed_at is None and batches[pk].attempts == 1
        assert f"written with batch {pks[0]} in a group that failed" in batches[pk].last_error
    assert "PreparedInvalid" in batches[pks[1]].last_error
    assert batches[pks[4]].attempts == 0 and batches[pks[4]].processed_at is None  # never taken
    assert Sample.objects.count() == 2

    # Their own tasks: each tried once already, so each goes alone, and the unreadable one fails by itself.
    second = usage_batch_process(inbox_pk=pks[1])
    assert second is not None and second.batches == 1
    with pytest.raises(Exception, match="bad magic"):
        usage_batch_process(inbox_pk=pks[2])
    bad = IngestBatch.objects.get(pk=pks[2])
    assert bad.attempts == 2 and bad.processed_at is None and "bad magic" in bad.last_error
    # A batch never tried leads a group again, of those never tried: the fifth and sixth, not the fourth.
    fifth = usage_batch_process(inbox_pk=pks[4])
    assert fifth is not None and fifth.batches == 2
    assert IngestBatch.objects.get(pk=pks[3]).processed_at is None
    assert usage_batch_process(inbox_pk=pks[3]).batches == 1
    assert Sample.objects.count() == 5 * 2


def test_only_batches_of_the_same_token_and_door_go_together_as_far_as_the_groups_records_allow(settings, cast,
                                                                                                token_id):  # fmt: skip
    settings.INGEST_COALESCE_BATCHES, settings.INGEST_COALESCE_RECORDS = 32, 59
    other = api_token_create(user=cast.admin, name="other agents", scope="ingest", clusters=["c1"])[0].pk
    first = _stored([batch_body(_node_batch("n0", 0))], token_id)[0]  # 2 records
    theirs = _stored([batch_body(_node_batch("n2", 0))], other)[0]
    imported = _stored([batch_body(_node_batch("n0", 1))], token_id)[0]
    IngestBatch.objects.filter(pk=imported).update(source=IngestBatch.Source.IMPORT)
    large = _stored([batch_body([r for s in range(2, 30) for r in _node_batch("n1", s)])], token_id)[0]  # 56
    late = _stored([batch_body(_node_batch("n1", 0))], token_id)[0]  # 2 more: 60 in all, over 59
    full = _stored([batch_body([r for s in range(30, 60) for r in _node_batch("n2", s)])], token_id)[0]  # 60

    assert usage_batch_process(inbox_pk=first).batches == 2  # with the large batch; neither theirs nor imported
    assert IngestBatch.objects.get(pk=large).processed_at is not None
    waiting = set(IngestBatch.objects.filter(processed_at__isnull=True).values_list("pk", flat=True))
    assert waiting == {theirs, imported, late, full}
    assert set(IngestBatch.objects.filter(pk__in=waiting).values_list("attempts", flat=True)) == {0}
    # The group's locks went with it, and none was taken on a batch outside it: every other batch is written by its
    # own task.
    with _other_session() as other:  # (this session holds its attempts' transaction locks until the test ends)
        for pk in (theirs, imported, late, full):
            assert other.execute("SELECT pg_try_advisory_lock(%s, %s)", [GROUP_LOCK_SPACE, pk]).fetchone() == (True,)
    # A batch that fills a group by itself leads none.
    assert usage_batch_process(inbox_pk=full).batches == 1
    assert usage_batch_process(inbox_pk=late).batches == 1
    assert usage_batch_process(inbox_pk=theirs).batches == 1
    assert usage_batch_process(inbox_pk=imported).batches == 1


def _other_session() -> psycopg.Connection:
    db = connection.settings_dict
    return psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"],
                           password=db["PASSWORD"], dbname=db["NAME"])  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_a_batch_another_session_holds_is_left_out_of_a_group_without_a_wait(settings, token_id):
    settings.INGEST_COALESCE_BATCHES = 32
    pks = _stored([batch_body(_node_batch(node, 0)) for node in NODES], token_id)
    holder = _other_session()
    try:
        holder.execute("SELECT 1 FROM usage_ingestbatch WHERE id = %s FOR UPDATE", [pks[1]])
        settings.INGEST_CLAIM_LOCK_TIMEOUT_S = 30  # a wait on the held row would show as a 30 s test

        assert usage_batch_process(inbox_pk=pks[0]).batches == 2
    finally:
        holder.close()
    held = IngestBatch.objects.get(pk=pks[1])
    assert (held.processed_at, held.attempts) == (None, 0)
    assert usage_batch_process(inbox_pk=pks[1]).batches == 1
    assert Sample.objects.count() == 3 * 2


@pytest.mark.django_db(transaction=True)
def test_the_attempts_of_a_group_are_counted_before_its_work_starts(settings, token_id, monkeypatch):
    """A worker that dies in a group (here: the work raises where a crash would stop it) has counted an attempt on
    every batch of it, committed before the work: a batch that kills its worker cannot hide in groups."""
    settings.INGEST_COALESCE_BATCHES = 3
    pks = _stored([batch_body(_node_batch(node, 0)) for node in NODES], token_id)
    seen: list[tuple[int, int, str]] = []

    def counted_then_crash(leader, more):
        claim_more(leader, more)
        with _other_session() as other:  # what another session sees: committed before the work
            seen.extend(other.execute("SELECT id, attempts, last_error FROM usage_ingestbatch WHERE id = ANY(%s)",
                                      [pks]).fetchall())  # fmt: skip
        raise SystemExit("the worker died")

    claim_more = writer.inbox_claim_more
    monkeypatch.setattr(writer, "inbox_claim_more", counted_then_crash)
    with pytest.raises(SystemExit):
        usage_batch_process(inbox_pk=pks[0])

    assert sorted(seen) == [(pk, 1, ATTEMPT_UNFINISHED) for pk in pks]
    assert list(IngestBatch.objects.filter(pk__in=pks).values_list("attempts", "processed_at")) == [(1, None)] * 3
