"""A closed month never changes: not through the API, the admin, nor late usage (that lands as an adjustment)."""

from decimal import Decimal

import pytest
import time_machine
from django.core.exceptions import ValidationError

from governance.costs.models import MonthClose, RateCard, StatementLine
from governance.costs.selectors import UNALLOCATED, chargeback_by_team, reconcile, statement_charges
from governance.costs.services import statement_close
from governance.lib.months import Month
from tests.costs.conftest import by_team, cents, declare, set_rate
from tests.factories import H100, committed, ingest, job_record

pytestmark = pytest.mark.django_db

NOV, DEC = Month(2026, 11), Month(2026, 12)


def job(job_id: str, start: str, end: str, gpus: int = 1):
    return job_record(job_id=job_id, gpus=gpus, start_time=start, submit_time=start, end_time=end, state="completed")


@pytest.fixture
def closed_november(cast, cluster):
    set_rate(H100, "2.00")
    declare(2)
    ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-03T02:00:00Z")])
    with time_machine.travel("2026-12-02T10:00:00Z", tick=False):
        statement_close(month=NOV, user=cast.finance)


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_closing_freezes_the_statement_lines(closed_november):
    lines = StatementLine.objects.filter(close__month=NOV.start.date())
    totals: dict[tuple[str, str], Decimal] = {}
    for line in lines:
        totals[(line.kind, line.team_name)] = totals.get((line.kind, line.team_name), Decimal(0)) + line.cost

    assert {key: cents(cost) for key, cost in totals.items()} == {
        ("usage", "NLP"): cents(4),
        ("unallocated", UNALLOCATED): cents(2 * 720 * 2 - 4),
    }
    assert lines.filter(kind="unallocated").count() == 30  # one line per day of the month


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_late_usage_for_a_closed_month_lands_as_an_adjustment_in_the_next_open_month(closed_november):
    ingest([job("2", "2026-11-10T00:00:00Z", "2026-11-10T03:00:00Z")])

    assert by_team(chargeback_by_team(month=NOV))["NLP"] == cents(4)
    adjustments = [c for c in statement_charges(month=DEC) if c.kind == "adjustment"]
    assert {(c.team, c.job_ref, cents(c.cost), str(c.corrects)) for c in adjustments} == {
        ("NLP", "2", cents(6), "2026-11"),
        (UNALLOCATED, "", cents(-6), "2026-11"),
    }
    assert by_team(chargeback_by_team(month=DEC))["NLP"] == cents(6)
    assert reconcile(month=NOV).ok


def test_an_adjustment_is_billed_once_even_after_the_next_month_closes(closed_november):
    with time_machine.travel("2026-12-02T10:00:00Z", tick=False):
        ingest([job("2", "2026-11-10T00:00:00Z", "2026-11-10T03:00:00Z")])
    with time_machine.travel("2027-01-02T10:00:00Z", tick=False):
        statement_close(month=DEC)
        december = by_team(chargeback_by_team(month=DEC))
        january = [c for c in statement_charges(month=Month(2027, 1)) if c.kind == "adjustment"]

    assert december["NLP"] == cents(6)
    assert january == []


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_a_month_cannot_be_closed_twice_or_before_it_ends(closed_november):
    with pytest.raises(ValidationError, match="2026-11 is already closed"):
        statement_close(month=NOV)
    with pytest.raises(ValidationError, match="2026-12 has not ended yet"):
        statement_close(month=DEC)
    assert MonthClose.objects.count() == 1


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_the_api_refuses_to_change_a_closed_month(client, cast, closed_november):
    client.force_login(cast.admin)
    lines_before = StatementLine.objects.count()

    again = client.post("/api/v1/months/2026-11/close/")
    back_rate = client.post(
        "/api/v1/rates/", {"gpu_model": H100, "price_per_gpu_hour": "9.00", "currency": "USD",
                           "valid_from": "2026-11-20T00:00:00Z"}, content_type="application/json",
    )  # fmt: skip
    back_capacity = client.post(
        "/api/v1/capacity/", {"cluster": "c1", "gpu_model": H100, "count": 9, "valid_from": "2026-11-20T00:00:00Z"},
        content_type="application/json",
    )  # fmt: skip
    back_budget = client.post(
        "/api/v1/budgets/", {"team": "nlp", "month": "2026-11", "amount": "10.00"}, content_type="application/json"
    )

    # Closing twice conflicts with the month's state; a term dated into it is a bad request naming the month.
    assert [r.status_code for r in (again, back_rate, back_capacity, back_budget)] == [409, 400, 400, 400]
    assert "closed month 2026-11" in back_rate.json()["error"]["message"]
    assert RateCard.objects.filter(price_per_gpu_hour=Decimal("9.00")).count() == 0
    assert StatementLine.objects.count() == lines_before
    assert by_team(chargeback_by_team(month=NOV))["NLP"] == cents(4)


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_finance_closes_a_month_through_the_api_and_an_engineer_cannot(client, cast, cluster):
    set_rate(H100, "2.00")
    client.force_login(cast.alice)
    assert client.post("/api/v1/months/2026-11/close/").status_code == 403

    client.force_login(cast.finance)
    response = client.post("/api/v1/months/2026-11/close/")

    assert response.status_code == 201 and response.json()["month"] == "2026-11"
    assert MonthClose.objects.get().closed_by == cast.finance


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_the_admin_refuses_to_change_a_closed_month(client, cast, closed_november):
    client.force_login(cast.admin)
    cast.admin.is_superuser = True
    cast.admin.save()
    line = StatementLine.objects.first()
    card = RateCard.objects.get()

    edit_line = client.post(f"/admin/costs/statementline/{line.pk}/change/", {"cost": "0"})
    delete_line = client.post(f"/admin/costs/statementline/{line.pk}/delete/", {"post": "yes"})
    back_rate = client.post("/admin/costs/ratecard/add/", {
        "gpu_model": H100, "price_per_gpu_hour": "9.00", "currency": "USD",
        "valid_from_0": "2026-11-20", "valid_from_1": "00:00:00",
    })  # fmt: skip
    delete_rate = client.post(f"/admin/costs/ratecard/{card.pk}/delete/", {"post": "yes"})

    assert edit_line.status_code == 403 and delete_line.status_code == 403 and delete_rate.status_code == 403
    assert back_rate.status_code == 200 and b"closed month 2026-11" in back_rate.content
    assert StatementLine.objects.filter(pk=line.pk, cost=line.cost).exists()
    assert RateCard.objects.count() == 1


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_a_rate_from_an_open_month_on_is_accepted_after_a_close(closed_november):
    card = set_rate(H100, "3.00", since="2026-12-01")

    assert card.price_per_gpu_hour == Decimal("3.00")


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_a_mapping_that_moves_a_closed_months_job_lands_as_an_adjustment_between_teams(closed_november, cast):
    from governance.org.models import ProjectMapping
    from governance.usage.remap import jobs_remap

    ProjectMapping.objects.create(value="llm-pretrain", project=cast.vision.projects.get())
    with committed():
        assert jobs_remap(accounts=["llm-pretrain"]) == 1

    assert by_team(chargeback_by_team(month=NOV))["NLP"] == cents(4)  # the closed month is as billed
    adjustments = [c for c in statement_charges(month=DEC) if c.kind == "adjustment"]
    assert {(c.team, c.job_ref, cents(c.cost)) for c in adjustments} == {
        ("NLP", "1", cents(-4)),
        ("Vision", "1", cents(4)),
    }


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_the_close_issues_the_months_invoice_which_the_admin_lists(client, cast, closed_november):
    client.force_login(cast.admin)
    cast.admin.is_superuser = True
    cast.admin.save()

    page = client.get("/admin/costs/monthclose/")

    assert MonthClose.objects.get().invoice_id == "GG-2026-11-gpu-governance"
    assert page.status_code == 200 and b"GG-2026-11-gpu-governance" in page.content
