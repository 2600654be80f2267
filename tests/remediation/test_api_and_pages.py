"""Policies through the API and the command (refused with the field and the reason, nothing written), and what the
pages show: the remediation page for admins and leads, the reclaimed figure on the team's month and the cluster."""

from __future__ import annotations

from io import StringIO

import pytest
import time_machine
from django.core.management import CommandError, call_command

from governance.api.models import AuditEntry
from governance.remediation.models import RemediationPolicy
from tests.factories import ingest, job_record
from tests.remediation.conftest import T0, idle_job, minutes, policy, rounds

URL = "/api/v1/remediation-policies/"


def post(client, body: dict):
    return client.post(URL, body, content_type="application/json")


@pytest.fixture
def c1(cast):
    ingest([job_record(job_id="1")])


def test_an_admin_creates_a_policy_through_the_api_on_record_and_a_lead_may_not(client, cast, c1):
    client.force_login(cast.admin)
    body = {"name": "nlp-dry", "cluster": "c1", "mode": "dry_run", "teams": ["nlp"], "exempt_users": ["bob"]}

    created = post(client, body)

    assert created.status_code == 201, created.content
    assert (created.json()["created_by"], created.json()["teams"], created.json()["mode"]) == (
        "admin",
        ["nlp"],
        "dry_run",
    )
    entry = AuditEntry.objects.get(door="api", model="remediation.remediationpolicy")
    assert entry.actor_name == "admin" and entry.changes["mode"] == [None, "dry_run"]
    client.force_login(cast.nlp_lead)
    assert post(client, body | {"name": "other"}).status_code == 403
    assert [p["name"] for p in client.get(URL).json()["results"]] == ["nlp-dry"]
    client.force_login(cast.vision_lead)
    assert client.get(URL).json()["results"] == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"quiet_start_hour": 22}, "quiet_end_hour"),
        ({"quiet_start_hour": 25, "quiet_end_hour": 6}, "quiet_start_hour"),
        ({"exempt_labels": "keep=yes"}, "exempt_labels"),
        ({"scheduler": "kubernetes"}, "api_url"),
        ({"teams": ["nope"]}, "teams"),
        ({"mode": "always"}, "mode"),
        ({"max_actions_per_hour": 0}, "max_actions_per_hour"),
    ],
)
def test_a_bad_policy_is_refused_naming_the_field_and_nothing_is_written(client, cast, c1, change, field):
    client.force_login(cast.admin)

    answer = post(client, {"name": "p", "cluster": "c1"} | change)

    assert answer.status_code == 400 and field in answer.json()["error"]["details"], answer.content
    assert not RemediationPolicy.objects.exists()


def test_the_command_sets_a_policy_and_refuses_a_bad_one_naming_the_field(cast, c1):
    out = StringIO()
    call_command("remediation_policy", "c1-idle", cluster="c1", mode="notify", quiet="22-6", exempt_user=["bob"],
                 teams="nlp", stdout=out)  # fmt: skip
    p = RemediationPolicy.objects.get()
    assert (p.mode, p.quiet_start_hour, p.quiet_end_hour, p.exempt_users) == ("notify", 22, 6, ["bob"])
    assert AuditEntry.objects.filter(door="command", model="remediation.remediationpolicy").count() == 1

    with pytest.raises(CommandError, match="api_url: a Kubernetes policy needs"):
        call_command("remediation_policy", "c1-idle", scheduler="kubernetes")
    with pytest.raises(CommandError, match="teams: no team named vizion"):
        call_command("remediation_policy", "c1-idle", teams="nlp,vizion")
    assert RemediationPolicy.objects.get().scheduler == "slurm"


def test_pages_and_api_show_the_action_the_reclaimed_figure_and_the_dry_run(client, cast, jobs, slurm):
    idle_job(jobs, "4242", "4343")
    policy(teams=["nlp"])
    policy(name="dry-c1", mode="dry_run")
    rounds(jobs, [T0, T0 + minutes(30), T0 + minutes(60)], job_ids=("4242", "4343"))

    client.force_login(cast.nlp_lead)
    with time_machine.travel(T0 + minutes(120), tick=False):  # the pages tell this month and the last 30 days
        team = client.get("/costs/team/nlp/?month=2026-11").content.decode()
        cluster = client.get("/clusters/c1/").content.decode()
        page = client.get("/remediation/").content.decode()
        cases = client.get("/api/v1/remediations/?policy=idle-c1&pending=false").json()["results"]
        [dry] = client.get("/api/v1/remediation/dry-run/").json()["results"]

    # two jobs of 1 GPU each, 10 h each to their time limit, at 2.00 USD per GPU-hour
    assert "reclaimed 20.0 GPU-hours, 40.00 USD this month" in team
    assert "Remediation reclaimed 20.0 GPU-hours, 40.00 USD this month (2 actions)" in cluster
    assert "scontrol requeue 4242" in page and "dry-c1" in page
    assert [s["decision"] for s in cases[0]["steps"]] == ["warn", "warn_again", "act"]
    assert (dry["policy"], dry["warnings"], dry["actions"], dry["gpu_hours"]) == ("dry-c1", 4, 2, "20.0000")
    assert client.get("/api/v1/remediations/?pendng=true").status_code == 400
    client.force_login(cast.alice)
    assert client.get("/remediation/").status_code == 404
    client.force_login(cast.vision_lead)
    assert client.get("/api/v1/remediations/").json()["results"] == []
