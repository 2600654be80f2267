"""Showback (costs shown, not billed) and carbon (kWh x the grid intensity of the cluster), both effective-dated
per cluster, refused into closed months, frozen at the close, and in the FOCUS export (SQL and Python paths)."""

import csv
import io
import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.db.models import Sum

from governance.costs.carbon import country_intensity
from governance.costs.focus import _python_csv, focus_csv
from governance.costs.models import Charge, MonthClose, StatementLine
from governance.costs.selectors import statement_charges
from governance.costs.services import billing_mode_set, grid_intensity_set, statement_close
from governance.lib.months import Month
from tests.costs.conftest import declare, set_rate
from tests.factories import H100, at, ingest, job_record, series
from tests.invariants import assert_billing_invariants, closed_totals

pytestmark = pytest.mark.django_db

OCT, NOV = Month(2026, 10), Month(2026, 11)


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def rows_of(chunks) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO("".join(c if isinstance(c, str) else c.decode() for c in chunks))))


def job(job_id: str, day: str, watts: float = 500.0) -> None:
    """One H100 for two hours from 08:00 on `day`, drawing `watts` (sampled every 10 minutes)."""
    start = f"{day}T08:00:00Z"
    ingest([
        job_record(job_id=job_id, gpus=1, submit_time=start, start_time=start, end_time=f"{day}T10:00:00Z",
                   state="completed"),
        *series(start=at(start), minutes=120, every_s=600, job_id=job_id, sm_util=80.0, power_w=watts),
    ])  # fmt: skip


@pytest.fixture
def billed(cast, cluster):
    set_rate(H100, "10.00")
    declare(2)


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_a_showback_cluster_shows_the_cost_but_bills_nothing(billed):
    job("1", "2026-11-03")
    billing_mode_set(cluster="c1", mode="showback", valid_from=moment("2026-11-01"))
    from tests.factories import priced

    priced()

    for rows in (rows_of(focus_csv(month=NOV)), rows_of(_python_csv(statement_charges(month=NOV), NOV))):
        usage = [r for r in rows if r["x_ChargeKind"] == "usage"]
        assert [(r["BilledCost"], r["EffectiveCost"], r["x_BillingMode"]) for r in usage] == [
            ("0.000000", "20.000000", "showback")]  # fmt: skip
        assert all(Decimal(r["ContractedCost"]) <= Decimal(r["ListCost"]) for r in rows)
    assert_billing_invariants()


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_a_billing_mode_dated_into_a_closed_month_is_refused_and_the_closed_month_stays_billed(billed):
    job("1", "2026-10-05")
    statement_close(month=OCT)
    before = closed_totals()

    with pytest.raises(ValidationError, match="closed month 2026-10"):
        billing_mode_set(cluster="c1", mode="showback", valid_from=moment("2026-10-15"))
    billing_mode_set(cluster="c1", mode="showback", valid_from=moment("2026-11-01"))
    job("2", "2026-11-03")

    assert set(StatementLine.objects.values_list("billed", flat=True)) == {True}
    assert set(Charge.objects.filter(month=NOV.start.date()).values_list("billed", flat=True)) == {False}
    assert MonthClose.objects.get().terms["modes"] == []  # no term was in force when October closed
    assert_billing_invariants(before)


def test_a_mode_that_is_not_billed_or_showback_is_refused(billed):
    with pytest.raises(ValidationError, match="mode"):
        billing_mode_set(cluster="c1", mode="free", valid_from=moment("2026-11-01"))


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_carbon_is_the_energy_times_the_grid_intensity_of_the_cluster_in_force_that_day(billed):
    grid_intensity_set(cluster="c1", kg_co2e_per_kwh="0.400", valid_from=moment("2026-11-01"))
    grid_intensity_set(cluster="c1", kg_co2e_per_kwh="0.100", valid_from=moment("2026-11-10"))
    job("1", "2026-11-03")  # 2 h x 0.5 kW = 1 kWh at 0.4
    job("2", "2026-11-12", watts=250.0)  # 0.5 kWh at 0.1

    rows = Charge.objects.filter(kind="usage").order_by("day").values_list("energy_kwh", "carbon_kg")
    assert [(round(k, 3), round(c, 3)) for k, c in rows] == [
        (Decimal("1.000"), Decimal("0.400")), (Decimal("0.500"), Decimal("0.050"))]  # fmt: skip
    exported = rows_of(focus_csv(month=NOV))
    usage = [r for r in exported if r["x_ChargeKind"] == "usage"]
    assert [(r["x_EnergyKwh"], r["x_CarbonKgCo2e"]) for r in usage] == [
        ("1.000000", "0.400000"), ("0.500000", "0.050000")]  # fmt: skip
    total = Charge.objects.aggregate(k=Sum("carbon_kg"))["k"]
    assert round(total, 6) == Decimal("0.450000")
    assert_billing_invariants()


@time_machine.travel("2026-12-02T12:00:00Z", tick=False)
def test_the_close_freezes_the_intensity_and_a_later_term_leaves_the_month_as_it_was(billed):
    grid_intensity_set(cluster="c1", kg_co2e_per_kwh="0.400", valid_from=moment("2026-11-01"))
    job("1", "2026-11-03")
    statement_close(month=NOV)

    grid_intensity_set(cluster="c1", kg_co2e_per_kwh="0.900", valid_from=moment("2026-12-01"))
    job("late", "2026-11-04")  # late usage of November: priced under November's frozen terms

    assert MonthClose.objects.get().terms["intensities"] == [["c1", "2026-11-01T00:00:00+00:00", "0.400000"]]
    late = Charge.objects.get(kind="usage", job_ref="late")
    assert round(late.carbon_kg, 3) == round(late.energy_kwh * Decimal("0.4"), 3)
    assert_billing_invariants()


def test_a_grid_intensity_defaults_from_the_countrys_value_in_the_shipped_dataset(tmp_path):
    data = tmp_path / "global_energy_mix.json"
    data.write_text(json.dumps({"DEU": {"carbon_intensity": 380.95, "country_name": "Germany", "year": 2023}}))

    value, source = country_intensity("deu", path=data)

    assert value == Decimal("0.38095") and "Germany, 2023" in source
    with pytest.raises(ValueError, match="alpha-3"):
        country_intensity("XYZ", path=data)


def test_without_a_value_or_the_dataset_the_intensity_is_refused_with_the_reason(billed, monkeypatch):
    monkeypatch.setattr("governance.costs.carbon.dataset_path", lambda: None)

    with pytest.raises(ValidationError, match="carbon"):
        grid_intensity_set(cluster="c1", location="DEU", valid_from=moment("2026-11-01"))


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_the_team_page_and_the_api_say_what_is_shown_not_billed_and_the_carbon(client, cast, billed):
    grid_intensity_set(cluster="c1", kg_co2e_per_kwh="0.400", valid_from=moment("2026-11-01"))
    billing_mode_set(cluster="c1", mode="showback", valid_from=moment("2026-11-01"))
    job("1", "2026-11-03")
    client.force_login(cast.nlp_lead)

    page = client.get("/costs/team/nlp/?month=2026-11").content.decode()
    api = client.get("/api/v1/footprint/", {"month": "2026-11"}).json()

    assert "Shown, not billed (showback)" in page and "20.00 USD" in page and "0.4 kg CO2e" in page
    assert api == [{"team": "NLP", "energy_kwh": "1.000", "carbon_kg": "0.400", "showback_cost": "20.00",
                    "currency": "USD"}]  # fmt: skip
