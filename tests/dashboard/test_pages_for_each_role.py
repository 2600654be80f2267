"""The pages issue 18 added, through the Django client: /me/ and its API, the job lookup, findings in bulk,
closing a month after a confirmation, and the site's own error pages."""

import pytest
import time_machine

from governance.costs.models import MonthClose
from governance.efficiency.models import Finding
from governance.efficiency.services import findings_evaluate_all
from governance.usage.models import Job
from tests.factories import at

pytestmark = pytest.mark.django_db
NOV = "2026-11-04T12:00:00Z"


@pytest.fixture
def flagged(usage):
    findings_evaluate_all(now=at(NOV))


def test_an_engineer_lands_on_their_own_jobs_after_signing_in_and_a_lead_on_the_overview(client, cast):
    alice = client.post("/accounts/login/", {"username": "alice", "password": "pw-alice-1234"})
    client.logout()
    lead = client.post("/accounts/login/", {"username": "nlp-lead", "password": "pw-lead-1234"})

    assert alice.status_code == 302 and alice["Location"] == "/me/"
    assert lead["Location"] == "/"


def test_my_month_lists_only_my_jobs_with_their_ledger_cost_on_the_page_and_in_the_api(client, cast, usage):
    client.force_login(cast.alice)

    page = client.get("/me/", {"month": "2026-11"})
    api = client.get("/api/v1/me/month/", {"month": "2026-11"}).json()

    assert [j.job_ref for j in page.context["mine"].jobs] == ["1"] == [j["job_id"] for j in api["jobs"]]
    assert api["cost"] == "8.00" and b"8.00 USD" in page.content
    assert client.get("/api/v1/me/month/", {"month": "11/2026"}).status_code == 400


def test_a_job_is_found_by_its_scheduler_id_among_the_jobs_one_may_see(client, cast, usage):
    client.force_login(cast.vision_lead)
    dave = Job.objects.get(external_id="3")

    assert client.get("/jobs/", {"q": "3"})["Location"] == f"/jobs/{dave.pk}/"
    assert b"No job you may see" in client.get("/jobs/", {"q": "2"}).content  # bob's, of NLP


def test_a_lead_acknowledges_several_findings_at_once_and_never_another_teams(client, cast, flagged):
    client.force_login(cast.nlp_lead)
    nlp = list(Finding.objects.filter(job__project__team=cast.nlp, state="open").values_list("pk", flat=True))
    vision = list(Finding.objects.filter(job__project__team=cast.vision).values_list("pk", flat=True))

    client.post("/findings/bulk/", {"ids": [*nlp, *vision], "state": "acknowledged"})

    assert nlp and set(Finding.objects.filter(pk__in=nlp).values_list("state", flat=True)) == {"acknowledged"}
    assert "acknowledged" not in set(Finding.objects.filter(pk__in=vision).values_list("state", flat=True))


def test_the_findings_page_is_counted_and_filtered_like_the_api(client, cast, flagged):
    client.force_login(cast.admin)

    page = client.get("/findings/", {"mine": "1"})
    api = client.get("/api/v1/findings/", {"team": "nlp", "state": "live"}).json()
    nlp = client.get("/findings/", {"team": "nlp"})

    assert page.context["count"] == 0  # the admin ran no job
    assert nlp.context["count"] == api["count"]


def test_closing_a_month_shows_what_it_freezes_first_and_is_refused_for_a_month_without_rows(client, cast, usage):
    client.force_login(cast.finance)
    with time_machine.travel("2026-12-02T00:00:00Z"):
        confirm = client.get("/costs/close/2026-11/")
        empty = client.get("/costs/close/2026-06/")
        client.post("/costs/close/2026-06/")
        assert not MonthClose.objects.exists()
        client.post("/costs/close/2026-11/")
        page = client.get("/costs/")

    assert b'id="confirm-close"' in confirm.content and b"Freeze 2026-11 at" in confirm.content
    assert b'id="confirm-close"' not in empty.content and b"nothing to close" in empty.content
    assert MonthClose.objects.get().closed_by == cast.finance
    assert str(page.context["month"]) == "2026-11" and b"by finance" in page.content


def test_a_missing_page_is_the_sites_own_with_its_navigation(client, cast, settings):
    settings.DEBUG = False
    client.force_login(cast.alice)

    response = client.get("/jobs/999999/")

    assert response.status_code == 404
    assert b'id="error-404"' in response.content and b"Sign out alice" in response.content
