"""Owned GPUs priced from what they cost: capex amortised over the depreciation months (to the cent), measured
power, an overhead share; the rate is written as the cluster's rate cards and shown with its arithmetic."""

from decimal import Decimal

import pytest
import time_machine

from governance.costs.models import OwnedGpuCost, RateCard
from governance.costs.owned import owned_rate_derive
from governance.costs.services import owned_gpu_rates_set
from governance.lib.money import to_cents
from governance.lib.months import Month
from tests.costs.conftest import declare
from tests.factories import H100, at, ingest, job_record, series
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("purchase", "residual", "months", "start"),
    [("30000.00", "3000.00", 36, Month(2026, 1)), ("31999.99", "1234.57", 37, Month(2024, 2)),
     ("250000.00", "0.00", 60, Month(2027, 12)), ("0.07", "0.00", 7, Month(2026, 2))],
)  # fmt: skip
def test_amortised_rates_reproduce_the_capex_over_the_depreciation_months_to_the_cent(purchase, residual, months,
                                                                                     start):  # fmt: skip
    d = owned_rate_derive(purchase=Decimal(purchase), residual=Decimal(residual), months=months, start=start,
                          mean_kw=Decimal("0.5"), power_price=Decimal("0.2"), overhead_share=Decimal("0.1"),
                          currency="USD")  # fmt: skip

    charged = [to_cents(m.capex_rate * m.hours) for m in d.months]  # a GPU held every hour of each month
    assert charged == [m.capex for m in d.months]
    assert sum(charged) == Decimal(purchase) - Decimal(residual)
    assert len(d.months) == months and d.months[0].month == start


def test_the_rate_adds_measured_power_and_the_overhead_share_and_says_how():
    d = owned_rate_derive(purchase=Decimal("30000"), residual=Decimal("3000"), months=36, start=Month(2026, 11),
                          mean_kw=Decimal("0.5"), power_price=Decimal("0.2"), overhead_share=Decimal("0.1"),
                          currency="USD")  # fmt: skip

    november = d.months[0]
    assert (november.capex, november.hours, november.capex_rate) == (Decimal("750.00"), 720, Decimal("1.041667"))
    assert november.power_rate == Decimal("0.100000") and november.overhead_rate == Decimal("0.114167")
    assert november.rate == Decimal("1.255834")
    assert d.explain()[-1] == "rate (2026-11) = 1.041667 + 0.100000 + 0.114167 = 1.255834 USD/GPU-h"


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_the_service_writes_a_rate_card_per_open_month_from_the_measured_power(cast, cluster):
    declare(2)
    start = at("2026-11-02T00:00:00Z")
    ingest([job_record(job_id="1", gpus=1, submit_time="2026-11-02T00:00:00Z", start_time="2026-11-02T00:00:00Z",
                       end_time="2026-11-02T02:00:00Z", state="completed"),
            *series(start=start, minutes=120, every_s=600, job_id="1", sm_util=90.0, power_w=500.0)])  # fmt: skip
    cost = OwnedGpuCost.objects.create(cluster=cluster, gpu_model=H100, purchase_price_per_gpu=Decimal("30000"),
                                       residual_value_per_gpu=Decimal("3000"), depreciation_months=36,
                                       power_price_per_kwh=Decimal("0.2"), overhead_share=Decimal("0.1"),
                                       in_service_from=Month(2026, 11).start.date())  # fmt: skip

    from tests.factories import committed

    with committed():
        d = owned_gpu_rates_set(cost=cost)

    assert d.mean_kw == Decimal("0.5000")
    cards = RateCard.objects.filter(cluster=cluster, gpu_model=H100).order_by("valid_from")
    assert cards.count() == 36 and cards[0].price_per_gpu_hour == Decimal("1.255834")
    assert_billing_invariants()


def test_the_command_prints_the_rate_with_its_arithmetic(cluster):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("owned_rate", "c1", H100, "--purchase", "30000", "--residual", "3000", "--months", "36", "--from",
                 "2026-11", "--power-price", "0.2", "--overhead", "0.1", stdout=out)  # fmt: skip

    assert "capex rate (2026-11) = 750.00 USD / 720 h = 1.041667 USD/GPU-h" in out.getvalue()
    assert not RateCard.objects.exists()
