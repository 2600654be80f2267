"""Terms through the Django admin: what an admin saves or deletes there re-prices the open days as the services do,
and nothing there reaches into a closed month."""

from decimal import Decimal

import pytest
import time_machine

from governance.costs.models import Budget, RateCard
from governance.costs.selectors import chargeback_by_team
from governance.costs.services import statement_close
from governance.fleet.models import Cluster
from governance.lib.months import Month
from tests.costs.conftest import by_team, cents, declare, set_rate
from tests.factories import H100, committed, ingest, job_record
from tests.invariants import assert_billing_invariants, closed_totals

pytestmark = pytest.mark.django_db

NOV, DEC = Month(2026, 11), Month(2026, 12)


def job(job_id: str, start: str, end: str, team: str = "nlp", project: str = "llm-pretrain"):
    return job_record(job_id=job_id, gpus=1, start_time=start, submit_time=start, end_time=end, state="completed",
                      team=team, project=project)  # fmt: skip


@pytest.fixture
def admin_client(client, cast):
    cast.admin.is_superuser = True
    cast.admin.save()
    client.force_login(cast.admin)
    return client


DEC_6 = "2026-12-06T00:00:00Z"


@pytest.fixture
def december(cast, cluster):
    """1 GPU at 2.00 from December 1; NLP and Vision each ran 2 GPU-hours on December 3. Written at the moment the
    tests stand at: written at the real time instead, from December 7 on the pricing also charged that day's idle
    capacity up to the real clock, a day the tests' December 6 never re-prices."""
    with time_machine.travel(DEC_6, tick=False):
        set_rate(H100, "2.00")
        declare(1, since="2026-12-01")
        ingest([job("1", "2026-12-03T00:00:00Z", "2026-12-03T02:00:00Z")])
        ingest([job("2", "2026-12-03T02:00:00Z", "2026-12-03T04:00:00Z", team="vision", project="detector")])


@time_machine.travel(DEC_6, tick=False)
def test_a_share_policy_added_in_the_admin_splits_the_unallocated_line_by_team_weight(admin_client, december):
    cluster = Cluster.objects.get(name="c1")

    with committed():
        response = admin_client.post("/admin/costs/unallocatedpolicyterm/add/", {
            "cluster": cluster.pk, "policy": "share", "valid_from_0": "2026-12-01", "valid_from_1": "00:00:00",
        })  # fmt: skip

    # 5 days x 24 h x 2.00 = 240.00; each team used 4.00, and bears half of the other 232.00.
    assert response.status_code == 302
    assert Cluster.objects.get(pk=cluster.pk).unallocated_policy == "share"
    assert by_team(chargeback_by_team(month=DEC)) == {"NLP": cents(120), "Vision": cents(120)}
    assert_billing_invariants()


@time_machine.travel(DEC_6, tick=False)
def test_deleting_a_rate_card_in_the_admin_reprices_the_open_days_at_the_rate_before_it(admin_client, december):
    later = set_rate(H100, "5.00", since="2026-12-03")
    assert by_team(chargeback_by_team(month=DEC))["NLP"] == cents(10)

    with committed():
        response = admin_client.post(f"/admin/costs/ratecard/{later.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert by_team(chargeback_by_team(month=DEC))["NLP"] == cents(4)
    assert_billing_invariants()


@pytest.fixture
def closed_november(cast, cluster):
    set_rate(H100, "2.00")
    declare(2)
    ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-03T02:00:00Z")])
    with time_machine.travel("2026-12-02T10:00:00Z", tick=False), committed():
        statement_close(month=NOV, user=cast.finance)


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_moving_a_rate_card_of_a_closed_month_into_an_open_one_is_refused_in_the_admin(admin_client,
                                                                                     closed_november):  # fmt: skip
    card = RateCard.objects.get()
    before = closed_totals()

    response = admin_client.post(f"/admin/costs/ratecard/{card.pk}/change/", {
        "gpu_model": H100, "price_per_gpu_hour": "9.00", "currency": "USD",
        "valid_from_0": "2026-12-01", "valid_from_1": "00:00:00",
    })  # fmt: skip

    # Moving it would take the rate away from the closed November it priced.
    assert response.status_code == 200
    assert b"valid_from: 2026-01-01T00:00:00+00:00 falls in or before the closed month 2026-11" in response.content
    assert RateCard.objects.get().price_per_gpu_hour == Decimal("2.00")
    assert_billing_invariants(before)


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_a_budget_for_a_closed_month_is_refused_in_the_admin(admin_client, cast, closed_november):
    response = admin_client.post("/admin/costs/budget/add/", {
        "team": cast.nlp.pk, "month": "2026-11-15", "amount": "100.00", "currency": "USD", "thresholds": "[50]",
        "webhook_url": "",
    })  # fmt: skip

    assert response.status_code == 200
    assert b"2026-11 is closed; a closed month never changes." in response.content
    assert not Budget.objects.exists()


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_a_budget_added_in_the_admin_counts_from_the_first_of_its_month(admin_client, cast, closed_november):
    response = admin_client.post("/admin/costs/budget/add/", {
        "team": cast.nlp.pk, "month": "2026-12-15", "amount": "100.00", "currency": "USD", "thresholds": "[50]",
        "webhook_url": "",
    })  # fmt: skip

    assert response.status_code == 302
    assert f"{Budget.objects.get(team=cast.nlp).month:%Y-%m-%d}" == "2026-12-01"
