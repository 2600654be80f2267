import html
import json

import pytest
import time_machine

from governance.costs.models import MonthClose
from governance.costs.services import budget_set
from governance.lib.months import Month
from tests.costs.conftest import declare, set_rate
from tests.factories import H100, ingest, job_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def usage(cast, cluster):
    set_rate(H100, "2.00")
    declare(4)
    ingest([
        job_record(job_id="1", gpus=2, end_time="2026-11-03T19:12:00Z", state="completed"),
        job_record(job_id="2", project="detector", team="vision", end_time="2026-11-03T10:12:00Z", state="completed"),
    ])  # fmt: skip


def figure(response, name: str) -> dict:
    return json.loads(json.dumps(response.context[name]))


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_a_team_lead_sees_their_month_by_project_model_trend_and_budget(client, cast, usage):
    budget_set(team=cast.nlp, month=Month(2026, 11), amount="100.00")
    client.force_login(cast.nlp_lead)

    response = client.get("/costs/team/nlp/", {"month": "2026-11"})

    assert response.status_code == 200
    assert figure(response, "by_project")["data"][0]["x"] == [40.0]
    assert figure(response, "by_model")["data"][0]["y"] == [H100]
    trend = figure(response, "trend")["data"][0]
    assert len(trend["x"]) == 12 and trend["x"][-1] == "2026-11" and trend["y"][-1] == 40.0
    assert figure(response, "budget_chart")["data"][0]["x"] == [40.0]
    assert response.context["budget_state"].headline == "Under budget"  # the month is over: no forecast to speak of
    assert b'data-figure="cost-by-project-figure"' in response.content


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_a_lead_cannot_open_another_teams_month(client, cast, usage):
    client.force_login(cast.nlp_lead)

    assert client.get("/costs/team/vision/", {"month": "2026-11"}).status_code == 404
    assert client.get("/costs/team/vision/chargeback.csv", {"month": "2026-11"}).status_code == 404


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_an_engineer_sees_the_team_totals_but_no_lines(client, cast, usage):
    client.force_login(cast.alice)

    response = client.get("/costs/team/nlp/", {"month": "2026-11"})

    assert response.status_code == 200 and b"40.00 USD" in response.content
    assert "by_project" not in response.context and b'id="lines"' not in response.content
    assert client.get("/costs/team/nlp/chargeback.csv", {"month": "2026-11"}).status_code == 404


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_the_team_page_csv_is_the_teams_focus_rows(client, cast, usage):
    client.force_login(cast.nlp_lead)

    body = b"".join(client.get("/costs/team/nlp/chargeback.csv", {"month": "2026-11"}).streaming_content).decode()

    assert body.startswith("BilledCost,") and "NLP" in body and "Vision" not in body


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_finance_sees_all_teams_reconciles_and_closes_with_the_button(client, cast, usage):
    client.force_login(cast.finance)

    page = client.get("/costs/", {"month": "2026-11"})
    closed = client.post("/costs/close/2026-11/", follow=True)

    assert [c.team for c, *_ in page.context["rows"]] == ["(unallocated)", "NLP", "Vision"]
    assert b'id="close-month"' in page.content and page.context["reconciliation"].ok
    assert MonthClose.objects.filter(closed_by=cast.finance).exists()
    assert b"frozen" in closed.content and b'id="close-month"' not in closed.content


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_only_finance_can_press_close(client, cast, usage):
    client.force_login(cast.nlp_lead)

    assert client.post("/costs/close/2026-11/").status_code == 403
    assert client.get("/costs/").status_code == 302
    assert not MonthClose.objects.exists()


@time_machine.travel("2026-11-20T10:00:00Z", tick=False)
def test_a_lead_asks_for_a_budget_once_and_finance_is_told(
    client, cast, usage, mailoutbox, django_capture_on_commit_callbacks
):
    from governance.api.models import AuditEntry
    from governance.costs.models import BudgetRequest

    cast.finance.email = "finance@example.org"
    cast.finance.save()
    client.force_login(cast.nlp_lead)
    url = "/costs/team/nlp/budget-request/?month=2026-11"

    with django_capture_on_commit_callbacks(execute=True):
        first = client.post(url)
    again = client.post(url, follow=True)

    assert first.status_code == 302 and first["Location"].endswith("/costs/team/nlp/?month=2026-11#budget")
    assert BudgetRequest.objects.filter(team=cast.nlp, requested_by_name="nlp-lead").count() == 1
    assert [m.to for m in mailoutbox] == [["finance@example.org"]]
    assert "nlp-lead already asked for NLP's 2026-11 budget on 2026-11-20" in html.unescape(again.content.decode())
    assert AuditEntry.objects.filter(door="page", model="costs.budgetrequest").count() == 1
