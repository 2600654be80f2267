"""Month-end forecasts from the ledger: the command, the API (visible teams only), the forecast budget alert."""

import json
from datetime import date
from decimal import Decimal
from io import StringIO

import pytest
import time_machine
from django.core import mail
from django.core.management import call_command

from governance.costs.forecasts import spend_forecast
from governance.costs.models import BudgetAlert
from governance.costs.services import budget_alerts_check, budget_set
from governance.lib.months import Month
from tests.costs.conftest import declare, set_rate
from tests.factories import H100, ingest, job_record
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db

NOV = Month(2026, 11)


def run(job_id: str, start: str, end: str, team: str = "nlp", project: str = "llm-pretrain", gpus: int = 1) -> None:
    ingest([job_record(job_id=job_id, team=team, project=project, gpus=gpus, submit_time=start, start_time=start,
                       end_time=end, state="completed")])  # fmt: skip


@pytest.fixture
def steady_nlp(cast):
    """NLP holds one H100 at 10.00/h from 1 to 10 November (240.00 a day); Vision holds two on the 3rd."""
    set_rate(H100, "10.00")
    declare(4)
    with time_machine.travel("2026-11-20T12:00:00Z", tick=False):
        run("1", "2026-11-01T00:00:00Z", "2026-11-11T00:00:00Z")
        run("2", "2026-11-03T00:00:00Z", "2026-11-04T00:00:00Z", team="vision", project="detector", gpus=2)
        run("3", "2026-11-15T00:00:00Z", "2026-11-16T00:00:00Z")  # after the cut-off: ignored below


def test_the_command_prints_each_teams_forecast_as_of_the_end_of_a_day(steady_nlp):
    out = StringIO()

    call_command("forecast", "2026-11", "--as-of", "2026-11-10", "--format", "json", stdout=out)

    rows = {r["team"]: r for r in json.loads(out.getvalue())}
    # 240.00 a day for the 10 days so far and the last week: 30 x 240.00; a steady spend has a narrow band.
    assert rows["NLP"] == {"team": "NLP", "forecast": "7200.00", "low": "7200.00", "high": "7200.00",
                           "currency": "USD"}  # fmt: skip
    assert set(rows) == {"NLP", "Vision"}
    assert_billing_invariants()


def test_a_forecast_has_the_month_so_far_as_its_actual_line_and_an_interval_around_it(steady_nlp):
    nlp = spend_forecast(month=NOV, as_of=date(2026, 11, 16), keys=[steady_nlp_id()])[0]

    assert nlp.spent == Decimal("2640.00")  # ten days and the job of the 15th
    assert nlp.actual[-1] == (date(2026, 11, 16), Decimal("2640.00"))
    assert nlp.low <= nlp.forecast <= nlp.high
    assert nlp.path[0][0] == date(2026, 11, 16) and nlp.path[-1][0] == date(2026, 11, 30)


def steady_nlp_id() -> int:
    from governance.org.models import Team

    return Team.objects.get(slug="nlp").pk


@time_machine.travel("2026-11-11T12:00:00Z", tick=False)
def test_a_budget_the_forecast_will_exceed_is_announced_once_with_the_day_it_will_be_reached(
    cast, django_capture_on_commit_callbacks
):
    cast.nlp_lead.email = "lead@example.org"
    cast.nlp_lead.save()
    set_rate(H100, "10.00")
    declare(1)
    run("1", "2026-11-01T00:00:00Z", "2026-11-11T00:00:00Z")  # 2,400.00 of 5,000.00 so far
    budget_set(team=cast.nlp, month=NOV, amount="5000.00")

    with django_capture_on_commit_callbacks(execute=True):
        first = budget_alerts_check(month=NOV)
    with django_capture_on_commit_callbacks(execute=True):
        again = budget_alerts_check(month=NOV)

    forecast = [a for a in first if a.kind == "forecast"]
    assert [(a.spent, a.expected_on) for a in forecast] == [(Decimal("7200.00"), date(2026, 11, 21))]
    assert [a for a in again if a.kind == "forecast"] == []
    assert BudgetAlert.objects.filter(kind="forecast").count() == 1
    text = [m.body for m in mail.outbox if "forecast" in m.subject]
    assert text == ["NLP will exceed 5,000.00 USD by about the 21st (month-end forecast 7,200.00 USD)."]


@time_machine.travel("2026-11-11T12:00:00Z", tick=False)
def test_no_forecast_alert_when_the_forecast_stays_within_the_budget(cast):
    set_rate(H100, "10.00")
    run("1", "2026-11-01T00:00:00Z", "2026-11-11T00:00:00Z")
    budget_set(team=cast.nlp, month=NOV, amount="8000.00")

    assert [a for a in budget_alerts_check(month=NOV) if a.kind == "forecast"] == []


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_the_api_forecasts_only_the_teams_the_user_may_see(client, cast, steady_nlp):
    client.force_login(cast.alice)

    response = client.get("/api/v1/forecast/", {"month": "2026-11", "as_of": "2026-11-10"})

    assert response.status_code == 200, response.content
    assert [(r["name"], r["forecast"]) for r in response.json()] == [("NLP", "7200.00")]
    client.force_login(cast.vision_lead)
    assert [r["name"] for r in client.get("/api/v1/forecast/", {"month": "2026-11", "team": "nlp"}).json()] == []
    by_project = client.get("/api/v1/forecast/", {"month": "2026-11", "group": "project"}).json()
    assert [r["name"] for r in by_project] == ["Detector"]


def test_the_api_refuses_a_bad_month_or_group(client, cast):
    client.force_login(cast.admin)

    assert client.get("/api/v1/forecast/", {"month": "2026-13"}).status_code == 400
    assert client.get("/api/v1/forecast/", {"month": "2026-11", "group": "user"}).status_code == 400
