"""Issue 15, the ingest edge: replays of what a broken or hostile collector sent, and the safe outcome now."""

import json
import re
import uuid

import pytest
import time_machine
from django.core.management import call_command
from django.db import DataError

from collectors.records import decode_batch
from governance.api.models import ApiToken
from governance.api.services import api_token_create
from governance.org.models import Project, Team, User
from governance.usage import partitions, services
from governance.usage.models import GpuHour, IngestBatch, Job, JobGpuHour, Sample
from governance.usage.services import inbox_requeue, inbox_sweep, usage_batch_process, usage_batch_store
from tests.factories import at, batch_body, ingest, job_record, rate, sample_record, series

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _now():
    """Mid-November 2026: the factories' records (early November) are inside the ingest window."""
    with time_machine.travel("2026-11-20T12:00:00Z", tick=False):
        yield


URL = "/api/v1/ingest/"
MONTH = "2026-11"
START_AT = at("2026-11-03T09:15:00Z")


def post(client, body: bytes, token: str):
    return client.post(URL, data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def refused(response, code: str = "invalid_records") -> list[tuple[int | None, str | None]]:
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == code and all(d["reason"] for d in error["details"])
    return [(d["index"], d["field"]) for d in error["details"]]


def nothing_stored() -> bool:
    return (IngestBatch.objects.count(), Job.objects.count(), Sample.objects.count()) == (0, 0, 0)


def billing_still_answers(client, cast) -> None:
    client.force_login(cast.admin)
    assert client.get("/costs/", {"month": MONTH}).status_code == 200
    assert client.get("/api/v1/chargeback/", {"month": MONTH}).status_code == 200
    csv = client.get("/chargeback.csv", {"month": MONTH})
    assert csv.status_code == 200
    b"".join(csv.streaming_content)


# --- Bounds --------------------------------------------------------------------------------------


def test_a_power_of_1e308_is_refused_with_its_index_and_field(client, cast, ingest_token):
    rate()
    ingest([job_record(), *series(start=START_AT, minutes=3)])
    records = [job_record(), sample_record(ts="2026-11-03T10:00:00Z", power_w=1e308),
               sample_record(ts="2026-11-03T10:01:00Z", power_w=1e308)]  # fmt: skip

    response = post(client, batch_body(records), ingest_token)

    assert refused(response) == [(1, "power_w"), (2, "power_w")]
    assert (IngestBatch.objects.count(), Sample.objects.count()) == (1, 3)
    billing_still_answers(client, cast)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gpu_index", 40000),
        ("gpu_index", 2**64),
        ("gpu_numa_node", 40000),
        ("mig_profile", "x" * 100),
        ("sm_util", 100.5),
        ("sm_util", -1),
        ("mem_used_mib", 5 * 1024 * 1024),
        ("pcie_rx_mibps", 1e300),
        ("job_cpu_numa_nodes", [0, 70]),
        ("job_cpu_numa_nodes", list(range(60)) * 2),
        ("node", "gpu\x00017"),
        ("gpu_uuid", "GPU-\x1b[31m"),
        ("job_id", "x" * 201),
    ],
)
def test_a_sample_field_out_of_bounds_is_refused_naming_it_and_nothing_is_stored(client, ingest_token, field, value):
    response = post(client, batch_body([sample_record(), sample_record(**{field: value})]), ingest_token)

    assert [(index, name.split("[")[0]) for index, name in refused(response)] == [(1, field)]
    assert nothing_stored()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gpus", 10**6),
        ("user", "alice\nbob"),
        ("labels", {f"k{i}": "v" for i in range(100)}),
        ("labels", {"kind": "x" * 2000}),
        ("labels", {"kind": "a\x00b"}),
    ],
)
def test_a_job_field_out_of_bounds_is_refused_naming_it(client, ingest_token, field, value):
    response = post(client, batch_body([job_record(**{field: value})]), ingest_token)

    assert [(index, re.split(r"[.\[]", name)[0]) for index, name in refused(response)] == [(0, field)]
    assert nothing_stored()


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e400"])
def test_nan_and_infinity_are_refused(client, ingest_token, number):
    body = batch_body([sample_record(sm_util=12345.0)]).replace(b"12345.0", number)

    response = post(client, body, ingest_token)

    assert response.status_code == 400
    assert nothing_stored()


def test_a_sample_dated_9999_is_refused_and_partition_maintenance_keeps_working(client, ingest_token):
    response = post(client, batch_body([sample_record(ts="9999-12-31T00:00:00Z")]), ingest_token)

    assert refused(response) == [(0, "ts")]
    assert "latest time accepted" in response.json()["error"]["details"][0]["reason"]
    assert nothing_stored()
    partitions.partitions_maintain()


def test_times_more_than_a_few_minutes_ahead_or_older_than_the_horizon_are_refused(client, ingest_token, settings):
    settings.SAMPLE_RETENTION_DAYS = 30
    records = [
        sample_record(ts="2026-11-20T12:09:00Z"),  # within INGEST_MAX_FUTURE_MINUTES: clock skew
        sample_record(ts="2026-11-20T12:11:00Z"),
        sample_record(ts="2026-10-20T11:00:00Z"),  # before the retention horizon
        job_record(end_time="2026-11-21T00:00:00Z", state="completed"),
        job_record(job_id="old", submit_time="2025-01-01T00:00:00Z", start_time=None),  # INGEST_MAX_AGE_DAYS
    ]

    response = post(client, batch_body(records), ingest_token)

    assert refused(response) == [(1, "ts"), (2, "ts"), (3, "end_time"), (4, "submit_time")]
    assert nothing_stored()


def test_a_cluster_name_unfit_for_a_url_is_refused_and_the_cluster_page_still_answers(client, cast, ingest_token):
    for name in ["a/b", "c1\x00", "..", "-c", "c" * 65, "c 1"]:
        response = post(client, batch_body([sample_record(cluster=name)]), ingest_token)
        assert refused(response) == [(0, "cluster")], name
    assert nothing_stored()
    client.force_login(cast.alice)
    assert client.get("/cluster/").status_code == 200


def test_a_kubernetes_job_id_with_a_slash_is_accepted(client, ingest_token):
    response = post(client, batch_body([sample_record(job_id="ml-team/trainer-0")]), ingest_token)

    assert response.status_code == 202
    assert Job.objects.get().external_id == "ml-team/trainer-0"


def test_a_body_nested_100000_levels_deep_gets_400_not_500(client, ingest_token):
    deep = b"[" * 100_000 + b"]" * 100_000
    for body in [deep, b'{"batch_id": "%s", "collector": "x", "records": [%s]}' % (str(uuid.uuid4()).encode(), deep)]:
        response = post(client, body, ingest_token)
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "invalid_records"
    assert nothing_stored()


def test_a_body_nested_deeply_gets_400_from_every_json_endpoint(client, cast):
    client.force_login(cast.admin)
    response = client.post("/api/v1/tokens/", data=b"[" * 100_000, content_type="application/json")

    assert response.status_code == 400


# --- Duplicates ----------------------------------------------------------------------------------


def test_the_same_records_under_a_new_batch_id_are_stored_and_counted_once(client, ingest_token):
    records = [job_record(), *series(start=START_AT, minutes=6)]
    post(client, batch_body(records), ingest_token)

    again = post(client, batch_body(records), ingest_token)

    assert again.status_code == 202 and again.json()["duplicate"] is False
    assert (IngestBatch.objects.count(), Sample.objects.count()) == (2, 6)
    assert JobGpuHour.objects.get().samples == 6 and GpuHour.objects.get().samples == 6


def test_a_reading_repeated_within_one_batch_counts_once(client, ingest_token):
    records = [job_record(), *series(start=START_AT, minutes=3), *series(start=START_AT, minutes=3, sm_util=1.0)]

    post(client, batch_body(records), ingest_token)

    assert Sample.objects.count() == 3
    hour = JobGpuHour.objects.get()
    assert (hour.samples, hour.sm_sum) == (3, 3 * 87.5)


def test_a_replay_overlapping_new_readings_adds_only_the_new_ones(client, ingest_token):
    post(client, batch_body(series(start=START_AT, minutes=4)), ingest_token)

    post(client, batch_body(series(start=START_AT, minutes=6)), ingest_token)

    assert Sample.objects.count() == 6 and GpuHour.objects.get().samples == 6


# --- Authority -----------------------------------------------------------------------------------


def token(user: User, scope: str = "ingest", clusters: tuple[str, ...] = ("c1",)) -> str:
    return api_token_create(user=user, name=f"t{uuid.uuid4().hex[:8]}", scope=scope, clusters=clusters)[1]


def test_a_token_cannot_report_a_cluster_it_is_not_bound_to(client, cast):
    ingest([job_record(cluster="c2", project="detector", team="vision", gpus=1)])
    records = [sample_record(), job_record(cluster="c2", project="llm-pretrain", team="nlp", gpus=1000)]

    response = post(client, batch_body(records), token(cast.admin))

    assert refused(response, "cluster_not_allowed") == [(1, "cluster")]
    job = Job.objects.get(cluster__name="c2")
    assert (job.gpus, job.project.slug) == (1, "detector")
    assert IngestBatch.objects.count() == 1 and Sample.objects.count() == 0


def test_a_token_bound_to_no_cluster_reports_nothing(client, cast):
    response = post(client, batch_body([sample_record()]), token(cast.admin, clusters=()))

    assert refused(response, "cluster_not_allowed") == [(0, "cluster")]
    assert nothing_stored()


def test_an_admin_scoped_token_of_a_platform_admin_may_report_any_cluster(client, cast):
    response = post(client, batch_body([sample_record(cluster="anywhere")]), token(cast.admin, "admin", ()))

    assert response.status_code == 202
    assert Sample.objects.count() == 1


def test_the_ingest_api_never_creates_teams_or_projects(client, cast, ingest_token):
    teams, projects = Team.objects.count(), Project.objects.count()

    response = post(client, batch_body([job_record(project="new-project", team="new-team")]), ingest_token)

    assert response.status_code == 202
    assert (Team.objects.count(), Project.objects.count()) == (teams, projects)
    job = Job.objects.get()
    assert job.project is None and (job.account, job.team_name) == ("new-project", "new-team")
    assert IngestBatch.objects.get().source == IngestBatch.Source.API


def test_an_operators_import_still_creates_the_team_and_project_a_record_names(tmp_path, cast):
    path = tmp_path / "usage.jsonl"
    path.write_text(json.dumps(job_record(project="new-project", team="new-team")) + "\n")

    call_command("import_usage", str(path), verbosity=0)

    assert Job.objects.get().project.team.slug == "new-team"
    assert IngestBatch.objects.get().source == IngestBatch.Source.IMPORT


def test_create_api_token_binds_the_clusters_given(cast, capsys):
    call_command("create_api_token", "admin", "--scope", "ingest", "--name", "c", "--cluster", "c1", "--cluster", "c2")

    assert ApiToken.objects.get(name="c").clusters == ["c1", "c2"]


def test_the_tokens_api_binds_clusters_and_refuses_a_name_unfit_for_a_url(client, cast):
    client.force_login(cast.admin)

    made = client.post("/api/v1/tokens/", {"name": "k", "scope": "ingest", "clusters": ["c1"]}, "application/json")
    bad = client.post("/api/v1/tokens/", {"name": "b", "scope": "ingest", "clusters": ["a/b"]}, "application/json")

    assert made.status_code == 201 and made.json()["clusters"] == ["c1"]
    assert bad.status_code == 400 and ApiToken.objects.get(name="k").clusters == ["c1"]


# --- Dead letter ---------------------------------------------------------------------------------


@pytest.fixture
def failing_writer(monkeypatch):
    def fail(**kwargs):
        raise DataError("value out of range for type smallint")

    monkeypatch.setattr(services, "usage_prepared_write", fail)


def stored_batch(monkeypatch) -> IngestBatch:
    """A batch in the inbox that no worker has tried yet."""
    body = batch_body([sample_record()])
    with monkeypatch.context() as quiet:
        quiet.setattr(services, "_enqueue", lambda pk: None)
        usage_batch_store(batch=decode_batch(body), body=body, source=IngestBatch.Source.API)
    return IngestBatch.objects.get()


def test_a_data_error_in_the_worker_counts_as_an_attempt(failing_writer, monkeypatch):
    with pytest.raises(DataError):
        usage_batch_process(inbox_pk=stored_batch(monkeypatch).pk)

    batch = IngestBatch.objects.get()
    assert (batch.attempts, batch.processed_at, batch.dead_at) == (1, None, None)
    assert "out of range" in batch.last_error


def test_a_batch_failing_n_times_is_dead_and_never_swept_again(failing_writer, settings, monkeypatch):
    settings.INGEST_MAX_ATTEMPTS = 3
    inbox = stored_batch(monkeypatch)
    for _ in range(3):
        with pytest.raises(DataError):
            usage_batch_process(inbox_pk=inbox.pk)
    IngestBatch.objects.filter(pk=inbox.pk).update(received_at=inbox.received_at.replace(year=2020))

    assert usage_batch_process(inbox_pk=inbox.pk) is None
    batch = IngestBatch.objects.get()
    assert batch.attempts == 3 and batch.dead_at is not None and "out of range" in batch.last_error
    enqueued = []
    monkeypatch.setattr(services, "_enqueue", enqueued.append)
    assert inbox_sweep() == 0 and enqueued == []


def test_dead_batches_are_listed_for_admins_only(client, cast, failing_writer, settings, monkeypatch):
    settings.INGEST_MAX_ATTEMPTS = 1
    inbox = stored_batch(monkeypatch)
    with pytest.raises(DataError):
        usage_batch_process(inbox_pk=inbox.pk)

    client.force_login(cast.admin)
    listed = client.get("/api/v1/ingest/dead/").json()
    client.force_login(cast.nlp_lead)
    refused_to_lead = client.get("/api/v1/ingest/dead/")

    assert [(b["batch_id"], b["attempts"]) for b in listed["results"]] == [(str(inbox.batch_id), 1)]
    assert "out of range" in listed["results"][0]["last_error"]
    assert refused_to_lead.status_code == 403


def test_an_admin_requeues_a_dead_batch_from_the_admin_and_it_is_processed(client, cast, settings, monkeypatch):
    settings.INGEST_MAX_ATTEMPTS = 1
    real = services.usage_prepared_write
    monkeypatch.setattr(services, "usage_prepared_write", lambda **kw: (_ for _ in ()).throw(DataError("boom")))
    inbox = stored_batch(monkeypatch)
    with pytest.raises(DataError):
        usage_batch_process(inbox_pk=inbox.pk)
    assert usage_batch_process(inbox_pk=inbox.pk) is None  # dead: not claimed
    monkeypatch.setattr(services, "usage_prepared_write", real)
    client.force_login(User.objects.create_superuser("root", password="pw-root-1234"))

    response = client.post(
        "/admin/usage/ingestbatch/", {"action": "requeue", "_selected_action": [inbox.pk]}, follow=True
    )

    assert response.status_code == 200
    batch = IngestBatch.objects.get()
    assert batch.dead_at is None and batch.processed_at is not None and Sample.objects.count() == 1
    assert inbox_requeue(pks=[batch.pk]) == 0


def test_the_admin_lists_dead_batches_under_their_own_filter(client, cast, failing_writer, settings, monkeypatch):
    settings.INGEST_MAX_ATTEMPTS = 1
    inbox = stored_batch(monkeypatch)
    with pytest.raises(DataError):
        usage_batch_process(inbox_pk=inbox.pk)
    client.force_login(User.objects.create_superuser("root", password="pw-root-1234"))

    page = client.get("/admin/usage/ingestbatch/", {"state": "dead"})

    assert page.status_code == 200 and str(inbox.batch_id) in page.content.decode()
