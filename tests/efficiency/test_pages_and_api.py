import json

import pytest
import time_machine
from django.core.management import call_command

from governance.efficiency.models import Finding
from governance.efficiency.services import findings_evaluate_all
from tests.efficiency.conftest import a_job, gpu
from tests.factories import at, ingest, rate

pytestmark = pytest.mark.django_db
LATER = at("2026-11-10T00:00:00Z")


@pytest.fixture
def flagged(cast):
    """alice's nlp job idle for two hours; a vision job with low utilisation."""
    rate(price="2.00")
    ingest([a_job(minutes=120), *gpu(minutes=120, sm_util=0.0)])
    ingest([
        a_job(minutes=120, job_id="v1", user="vera", project="detector", team="vision"),
        *gpu(minutes=120, sm_util=10.0, mem_used_mib=60000.0, job_id="v1", uuid="GPU-V"),
    ])  # fmt: skip
    findings_evaluate_all(now=LATER)
    return cast


def test_the_api_lists_only_the_findings_a_user_may_see(client, flagged):
    client.force_login(flagged.nlp_lead)

    rows = client.get("/api/v1/findings/").json()["results"]

    assert rows and {r["team"] for r in rows} == {"nlp"}
    assert rows == sorted(rows, key=lambda r: -float(r["waste"]))


def test_the_api_filters_by_team_rule_state_and_job(client, flagged):
    client.force_login(flagged.admin)

    def rows(**query):
        return client.get("/api/v1/findings/", query).json()["results"]

    assert {r["team"] for r in rows(team="vision")} == {"vision"}
    assert {r["rule"] for r in rows(rule="idle_gpu")} == {"idle_gpu"}
    assert {r["job_id"] for r in rows(job="v1")} == {"v1"}
    assert rows(state="dismissed") == []


def test_a_lead_dismisses_a_finding_with_a_reason_through_the_api(client, flagged):
    client.force_login(flagged.nlp_lead)
    finding = Finding.objects.get(job__external_id="4242", rule="idle_gpu")

    url = f"/api/v1/findings/{finding.pk}/state/"
    refused = client.post(url, {"state": "dismissed"}, content_type="application/json")
    done = client.post(
        f"/api/v1/findings/{finding.pk}/state/", {"state": "dismissed", "reason": "profiling run"},
        content_type="application/json",
    )  # fmt: skip

    assert refused.status_code == 400 and "reason" in refused.json()["error"]["message"]
    assert done.status_code == 200 and done.json()["state"] == "dismissed"


def test_another_teams_finding_cannot_be_changed(client, flagged):
    client.force_login(flagged.vision_lead)
    finding = Finding.objects.get(job__external_id="4242", rule="idle_gpu")

    response = client.post(f"/api/v1/findings/{finding.pk}/state/", {"state": "acknowledged"})

    assert response.status_code == 404
    assert Finding.objects.get(pk=finding.pk).state == "open"


def test_the_job_page_shows_the_timeline_findings_with_advice_and_cost(client, flagged):
    client.force_login(flagged.alice)
    job = Finding.objects.get(job__external_id="4242", rule="idle_gpu").job

    response = client.get(f"/jobs/{job.pk}/")

    assert response.status_code == 200
    figure = response.context["figure"]
    assert {t["yaxis"] for t in figure["data"]} == {"y", "y2", "y3"}  # SM, memory, power
    assert b"sat idle" in response.content and b"4.00 USD" in response.content  # 2 GPU-hours at 2.00
    assert b'data-figure="job-timeline-figure"' in response.content


def test_a_job_of_another_team_is_not_found(client, flagged):
    client.force_login(flagged.vision_lead)
    job = Finding.objects.get(job__external_id="4242", rule="idle_gpu").job

    assert client.get(f"/jobs/{job.pk}/").status_code == 404


def test_the_findings_page_groups_by_job_sorts_by_waste_and_acknowledges_by_post(client, flagged):
    client.force_login(flagged.nlp_lead)
    finding = Finding.objects.get(job__external_id="4242", rule="idle_gpu")

    page = client.get("/findings/", {"team": "nlp"})
    client.post(f"/findings/{finding.pk}/state/", {"state": "acknowledged", "next": "/findings/"})

    groups = page.context["groups"]
    wastes = [f.waste for _, findings in groups for f in findings]
    assert wastes == sorted(wastes, reverse=True)
    assert [job.external_id for job, _ in groups] == ["4242"]
    assert page.context["count"] == len(wastes)
    assert Finding.objects.get(pk=finding.pk).state == "acknowledged"


def test_the_cluster_page_shows_utilisation_against_the_40_percent_line(client, flagged):
    client.force_login(flagged.admin)

    with time_machine.travel("2026-11-04T00:00:00Z", tick=False):
        response = client.get("/clusters/c1/")

    figure = response.context["figure"]
    assert figure["layout"]["shapes"][0]["y0"] == 40
    assert response.context["utilisation"] == pytest.approx(0.05)  # a share: one GPU at 0%, one at 10%
    assert response.context["idle_gpu_hours"] == pytest.approx(2.0)
    assert response.context["top_jobs"][0]["job__external_id"] in {"4242", "v1"}


def test_the_admin_lists_the_thresholds_in_force(client, flagged, settings):
    settings.GOVERNANCE_RULE_IDLE_MIN_MINUTES = 45.0
    client.force_login(flagged.admin)
    flagged.admin.is_superuser = True
    flagged.admin.save()

    response = client.get("/admin/efficiency/finding/thresholds/")

    assert b"GOVERNANCE_RULE_IDLE_MIN_MINUTES" in response.content and b"45.0" in response.content
    assert b"(overridden)" in response.content


def test_the_findings_command_prints_the_same_list_as_json(flagged, capsys):
    call_command("findings", "--team", "nlp", "--state", "open", "--format", "json")

    rows = json.loads(capsys.readouterr().out)
    assert rows and {r["team"] for r in rows} == {"nlp"}
    assert set(rows[0]) >= {"job_id", "rule", "severity", "state", "evidence", "waste", "advice"}
