"""A small world for the API tests: the cast, their jobs with rollups, a rate, tokens and an audit entry."""

from datetime import UTC, datetime

import pytest
from django.core.cache import cache

from governance.api.models import AuditEntry
from governance.api.services import api_token_create, audit_entry_record
from governance.costs.services import budget_set, statement_close
from governance.efficiency.models import Finding
from governance.efficiency.services import findings_evaluate_all
from governance.fleet.models import Cluster, Gpu, Node
from governance.lib.months import Month
from governance.notify.services import notification_enqueue
from governance.org.models import Membership, Project, ProjectMapping
from governance.usage.models import Job
from tests.factories import at, ingest, job_record, rate, series

NOV = datetime(2026, 11, 3, 10, tzinfo=UTC)

# What a viewer of one team must never find in a response: the other team's names and people.
NLP_MARKERS = ["llm-pretrain", '"nlp"', "NLP", "alice", "bob"]
VISION_MARKERS = ["detector", '"vision"', "Vision", "dave"]
UNATTRIBUTED_MARKERS = ["zebulon", "nobody-knows", "(unattributed)"]


@pytest.fixture(autouse=True)
def _fast_passwords_and_fresh_throttles(request, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Throttle counters live in the cache, a table of the database: only a test that uses the database has one.
    if request.node.get_closest_marker("django_db") or "_django_db_helper" in request.fixturenames:
        request.getfixturevalue("_django_db_helper")
        cache.clear()


def usage_records(
    job_id: str, user: str, project: str, team: str | None, gpu: str, sm_util: float = 87.5
) -> list[dict]:
    job = job_record(
        job_id=job_id, user=user, project=project, team=team, gpus=1,
        start_time="2026-11-03T09:00:00Z", end_time="2026-11-03T12:00:00Z", state="completed",
    )  # fmt: skip
    samples = series(
        start=NOV, minutes=60, every_s=600, job_id=job_id, gpu_uuid=gpu, node=f"node-{gpu}", sm_util=sm_util
    )
    return [job, *samples]


@pytest.fixture
def world(cast):
    """Jobs of alice and bob (nlp), dave (vision) and zebulon (no team), each with an hour of samples.

    alice's GPU is busy; bob's, dave's and zebulon's sit idle, so each of their jobs has findings. Each team
    has a November budget; October is closed, November open.
    """
    rate(price="2.00")
    ingest([
        *usage_records("1", "alice", "llm-pretrain", "nlp", "GPU-a"),
        *usage_records("2", "bob", "llm-pretrain", "nlp", "GPU-b", sm_util=0.0),
        *usage_records("3", "dave", "detector", "vision", "GPU-c", sm_util=0.0),
        *usage_records("4", "zebulon", "nobody-knows", None, "GPU-d", sm_util=0.0),
    ])  # fmt: skip
    jobs = {job.external_id: job for job in Job.objects.all()}
    findings_evaluate_all(now=at("2026-11-10T00:00:00Z"))
    statement_close(month=Month.parse("2026-10"), user=cast.finance, now=at("2026-11-10T00:00:00Z"))
    for team in (cast.nlp, cast.vision):
        budget_set(team=team, month=Month.parse("2026-11"), amount="1000.00")
    alice_token, _ = api_token_create(user=cast.alice, name="alice-laptop", scope="read")
    vision_token, _ = api_token_create(user=cast.vision_lead, name="vision-ci", scope="read")
    ProjectMapping.objects.create(value="acct-nlp", project=Project.objects.get(slug="llm-pretrain"))
    ProjectMapping.objects.create(value="acct-vision", project=Project.objects.get(slug="detector"))
    audit = audit_entry_record(actor=cast.admin, token=None, action=AuditEntry.Action.CREATE, instance=cast.nlp)
    (notification,) = notification_enqueue(event="finding.opened", payload={"finding_id": 1},
                                           destinations=["https://hooks.example.org/h"])  # fmt: skip
    return type(
        "World",
        (),
        {
            "cast": cast,
            "nlp": cast.nlp,
            "vision": cast.vision,
            "nlp_project": Project.objects.get(slug="llm-pretrain"),
            "vision_project": Project.objects.get(slug="detector"),
            "alice_membership": Membership.objects.get(user=cast.alice),
            "vision_membership": Membership.objects.get(user=cast.vision_lead),
            "nlp_mapping": ProjectMapping.objects.get(value="acct-nlp"),
            "vision_mapping": ProjectMapping.objects.get(value="acct-vision"),
            "cluster": Cluster.objects.get(),
            "node": Node.objects.first(),
            "gpu": Gpu.objects.first(),
            "job_alice": jobs["1"],
            "job_bob": jobs["2"],
            "job_dave": jobs["3"],
            "job_zed": jobs["4"],
            "alice_token": alice_token,
            "vision_token": vision_token,
            "audit": audit,
            "notification": notification,
            "finding_bob": Finding.objects.filter(job=jobs["2"]).first(),
            "finding_dave": Finding.objects.filter(job=jobs["3"]).first(),
        },
    )


def bearer(raw: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
