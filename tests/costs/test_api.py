from decimal import Decimal

import pytest
import time_machine

from governance.costs.models import Budget, DeclaredCapacity, RateCard
from tests.factories import H100

pytestmark = pytest.mark.django_db


def test_an_admin_adds_a_rate_card_through_the_api(client, cast):
    client.force_login(cast.admin)

    response = client.post("/api/v1/rates/", {"gpu_model": H100, "price_per_gpu_hour": "2.40", "currency": "EUR",
                                              "valid_from": "2026-11-01T00:00:00Z", "energy_price_per_kwh": "0.21"},
                           content_type="application/json")  # fmt: skip

    assert response.status_code == 201, response.content
    card = RateCard.objects.get()
    assert (card.price_per_gpu_hour, card.currency, card.energy_price_per_kwh) == (
        Decimal("2.40"), "EUR", Decimal("0.21"))  # fmt: skip
    assert client.get("/api/v1/rates/").json()["results"][0]["gpu_model"] == H100


def test_a_bad_currency_is_refused_with_the_field_named(client, cast):
    client.force_login(cast.admin)

    card = {"gpu_model": H100, "price_per_gpu_hour": "2.40", "currency": "EUX", "valid_from": "2026-11-01T00:00:00Z"}

    response = client.post("/api/v1/rates/", card, content_type="application/json")

    assert response.status_code == 400 and "currency" in str(response.json())
    assert not RateCard.objects.exists()


def test_only_admins_set_rates_and_capacity_and_a_read_token_writes_nothing(client, cast, read_token):
    client.force_login(cast.finance)
    capacity = {"cluster": "c1", "gpu_model": H100, "count": 8, "valid_from": "2026-11-01T00:00:00Z"}
    assert client.post("/api/v1/capacity/", capacity, content_type="application/json").status_code == 403
    client.logout()

    token = client.post("/api/v1/capacity/", capacity, content_type="application/json",
                        headers={"Authorization": f"Bearer {read_token}"})  # fmt: skip

    assert token.status_code == 403
    assert not DeclaredCapacity.objects.exists()


@time_machine.travel("2026-11-05T00:00:00Z", tick=False)
def test_a_lead_sets_their_teams_budget_but_not_another_teams(client, cast):
    client.force_login(cast.nlp_lead)

    own = client.post("/api/v1/budgets/", {"team": "nlp", "month": "2026-11", "amount": "5000.00"},
                      content_type="application/json")  # fmt: skip
    other = client.post("/api/v1/budgets/", {"team": "vision", "month": "2026-11", "amount": "5000.00"},
                        content_type="application/json")  # fmt: skip

    assert (own.status_code, other.status_code) == (201, 403)
    assert [(b.team.slug, b.amount) for b in Budget.objects.all()] == [("nlp", Decimal("5000.00"))]
    assert [b["team"] for b in client.get("/api/v1/budgets/").json()["results"]] == ["nlp"]
