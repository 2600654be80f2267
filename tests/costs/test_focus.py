"""The CSV follows FinOps FOCUS 1.2: mandatory columns, allowed values, UTC times, ISO 4217 currency."""

import csv
import io
import json
import re
from decimal import Decimal

import pytest
import time_machine
from django.core.management import call_command

from governance.costs.currency import ISO_4217
from governance.costs.focus import focus_csv
from governance.costs.services import statement_close
from governance.lib.months import Month
from tests.costs.conftest import declare, set_rate
from tests.factories import H100, ingest, job_record

pytestmark = pytest.mark.django_db

MANDATORY = {
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodStart",
    "BillingPeriodEnd", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargePeriodStart", "ChargePeriodEnd",
    "ContractedCost", "EffectiveCost", "InvoiceIssuerName", "ListCost", "PricingQuantity", "PricingUnit",
    "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
}  # fmt: skip
ASKED = {"ConsumedQuantity", "ConsumedUnit", "SubAccountId", "SubAccountName", "ResourceId", "ResourceName", "SkuId",
         "Tags", "x_IdleCost", "x_UsedGpuHours", "x_GpuModel"}  # fmt: skip
CHARGE_CATEGORIES = {"Usage", "Purchase", "Tax", "Credit", "Adjustment"}
SERVICE_CATEGORIES = {
    "AI and Machine Learning", "Analytics", "Business Applications", "Compute", "Databases", "Developer Tools",
    "Multicloud", "Identity", "Integration", "Internet of Things", "Management and Governance", "Media", "Migration",
    "Mobile", "Networking", "Security", "Storage", "Web", "Other",
}  # fmt: skip
UTC_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
NOV, DEC = Month(2026, 11), Month(2026, 12)


def rows_of(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))



def csv_text(*, month: Month, team_ids=None) -> str:
    return "".join(c if isinstance(c, str) else c.decode() for c in focus_csv(month=month, team_ids=team_ids))

@pytest.fixture
def usage(cast, cluster):
    set_rate(H100, "2.00")
    declare(1)
    ingest([job_record(gpus=1, start_time="2026-11-03T20:00:00Z", end_time="2026-11-05T02:00:00Z", state="completed",
                       submit_time="2026-11-03T20:00:00Z")])  # fmt: skip


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_the_csv_has_the_focus_columns_and_allowed_values(usage):
    statement_close(month=NOV)
    ingest([job_record(job_id="late", start_time="2026-11-20T00:00:00Z", end_time="2026-11-20T01:00:00Z",
                       submit_time="2026-11-20T00:00:00Z", state="completed")])  # fmt: skip

    rows = rows_of(csv_text(month=DEC))

    assert rows, "December has the adjustment rows"
    assert MANDATORY | ASKED <= set(rows[0])
    for row in rows:
        assert row["ChargeCategory"] in CHARGE_CATEGORIES
        assert row["ChargeClass"] in {"", "Correction"}
        assert (row["ChargeCategory"] == "Adjustment") == (row["ChargeClass"] == "Correction")
        assert row["ServiceCategory"] in SERVICE_CATEGORIES
        assert row["BillingCurrency"] in ISO_4217
        for column in ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"):
            assert UTC_TIME.match(row[column]), (column, row[column])
        assert row["PricingUnit"] == row["ConsumedUnit"] == "GPU-Hours"
        Decimal(row["BilledCost"]), Decimal(row["PricingQuantity"])
    adjustment = next(r for r in rows if r["ResourceName"] == "late")
    assert adjustment["ChargeCategory"] == "Adjustment" and Decimal(adjustment["BilledCost"]) == Decimal(2)
    assert adjustment["x_CorrectsMonth"] == "2026-11"


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_there_is_one_row_per_job_per_day_plus_the_unallocated_row(usage):
    rows = rows_of(csv_text(month=NOV))

    usage_rows = [r for r in rows if r["x_ChargeKind"] == "usage"]
    assert [(r["ChargePeriodStart"], r["ChargePeriodEnd"], r["BilledCost"]) for r in usage_rows] == [
        ("2026-11-03T20:00:00Z", "2026-11-04T00:00:00Z", "8.000000"),
        ("2026-11-04T00:00:00Z", "2026-11-05T00:00:00Z", "48.000000"),
        ("2026-11-05T00:00:00Z", "2026-11-05T02:00:00Z", "4.000000"),
    ]
    first = usage_rows[0]
    assert (first["SubAccountName"], first["ResourceId"], first["SkuId"], first["x_GpuModel"]) == (
        "NLP", "c1/4242", H100, H100)  # fmt: skip
    assert json.loads(first["Tags"]) == {"cluster": "c1", "project": "LLM pretraining", "user": "alice"}
    unallocated = [r for r in rows if r["x_ChargeKind"] == "unallocated"]
    # One per day, but for 4 November, which the job held whole: a zero line is not written.
    assert len(unallocated) == 29
    assert sum(Decimal(r["BilledCost"]) for r in unallocated) == Decimal(720 * 2 - 60)


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_the_api_and_the_command_give_the_same_csv(client, cast, usage, capsys):
    client.force_login(cast.finance)

    response = client.get("/api/v1/chargeback/", {"month": "2026-11", "format": "csv"})
    call_command("chargeback", "2026-11", "--format", "csv")

    assert response.status_code == 200 and response.streaming
    assert b"".join(response.streaming_content).decode() == capsys.readouterr().out


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_a_team_lead_gets_only_their_teams_rows_and_an_engineer_no_rows(client, cast, usage):
    ingest([job_record(job_id="v1", project="detector", team="vision", start_time="2026-11-07T00:00:00Z",
                       end_time="2026-11-07T01:00:00Z", state="completed")])  # fmt: skip
    client.force_login(cast.vision_lead)
    rows = rows_of(
        b"".join(client.get("/api/v1/chargeback/", {"month": "2026-11", "format": "csv"}).streaming_content).decode()
    )

    assert {r["SubAccountName"] for r in rows} == {"Vision"}
    client.force_login(cast.alice)
    assert client.get("/api/v1/chargeback/", {"month": "2026-11", "format": "csv"}).status_code == 403
    totals = client.get("/api/v1/chargeback/", {"month": "2026-11"}).json()
    assert [t["team"] for t in totals] == ["NLP"]
