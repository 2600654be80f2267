"""Money as finance and a lead meet it in Chromium: a closed month's late usage shows up as a correction on the
next month's statement, whose total is its CSV's, and a lead's table CSV is numbers a spreadsheet sums."""

import csv
import json
import uuid
from decimal import Decimal

import pytest

from governance.lib import format as fmt
from tests.browser.conftest import screenshot
from tests.browser.pages import CHROMIUM
from tests.factories import at, job_record, series

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (.ci/run installs it from Debian)"),
]


def test_finance_closes_october_and_late_october_usage_shows_as_a_correction_on_novembers_statement(
    page, live_server, world, sign_in, ingest_token, today, console_errors
):
    sign_in("finance")
    page.goto(live_server.url + "/costs/?month=2026-10")
    with page.expect_navigation():
        page.click("#close-month")
    with page.expect_navigation():
        page.click("#confirm-close")
    assert "Closed on" in page.inner_text("#status")

    # A collector's batch for a job of 25 October that ran on 2 GPUs for 3 hours, through the ingest API.
    start = at("2026-10-25T06:00:00Z")
    batch = {"batch_id": str(uuid.uuid4()), "collector": "late", "records": [
        job_record(job_id="5", user="alice", project="llm-eval", gpus=2, submit_time="2026-10-25T06:00:00Z",
                   start_time="2026-10-25T06:00:00Z", end_time="2026-10-25T09:00:00Z", state="completed"),
        *series(start=start, minutes=180, every_s=600, job_id="5", gpu_uuid="GPU-2", gpu_index=2, sm_util=50.0),
        *series(start=start, minutes=180, every_s=600, job_id="5", gpu_uuid="GPU-3", gpu_index=3, sm_util=50.0),
    ]}  # fmt: skip
    sent = page.context.request.post(live_server.url + "/api/v1/ingest/", data=json.dumps(batch),
                                     headers={"Authorization": f"Bearer {ingest_token}",
                                              "Content-Type": "application/json"})  # fmt: skip
    assert sent.status == 202, sent.text()

    page.goto(live_server.url + "/costs/?month=2026-11")
    rows = page.eval_on_selector_all(
        "#corrections-table tbody tr", "rs => rs.map((r) => [...r.cells].map((c) => c.innerText))"
    )
    total = page.inner_text("#month-total")
    with page.expect_download() as download:
        page.click("#statement-csv")
    lines = list(csv.DictReader(open(download.value.path(), encoding="utf-8")))
    screenshot(page, "costs-finance-november-with-corrections")

    nlp = [r for r in rows if r[1] == "NLP"]
    assert nlp and nlp[0][0] == "2026-10" and "late usage" in nlp[0][2] and "c1/5" in nlp[0][3]
    assert page.locator("#corrections-table a:has-text('c1/5')").get_attribute("href").startswith("/jobs/")
    adjustments = [Decimal(r["EffectiveCost"]) for r in lines if r["ChargeCategory"] == "Adjustment"]
    assert adjustments and page.inner_text("#corrections-total") == fmt.money(sum(adjustments), "USD")
    assert total == fmt.money(sum(Decimal(r["EffectiveCost"]) for r in lines), "USD")
    on_screen = sum(Decimal(r[5].replace(",", "").removesuffix(" USD")) for r in rows)
    assert fmt.money(on_screen, "USD") == page.inner_text("#corrections-total")
    assert console_errors == []


def test_a_leads_table_csv_parses_as_numbers_that_add_up_to_the_teams_month(page, live_server, world, sign_in, today):
    sign_in("nlp_lead")
    page.goto(live_server.url + "/costs/team/nlp/?month=2026-11")

    with page.expect_download() as download:
        page.click("[data-csv-table='projects']")
    rows = list(csv.DictReader(open(download.value.path(), encoding="utf-8")))
    on_screen = page.eval_on_selector_all(
        "#projects tbody tr", "rs => rs.map((r) => [...r.cells].map((c) => c.innerText))"
    )

    assert rows and {r["Currency"] for r in rows} == {"USD"}
    assert [
        [
            r["Project"],
            fmt.hours(Decimal(r["GPU-hours"])),
            fmt.money(Decimal(r["Cost"]), r["Currency"]),
            fmt.money(Decimal(r["Idle cost"]), r["Currency"]),
            f"{Decimal(r['Idle %'])}%",
        ]
        for r in rows
    ] == on_screen
    cost = sum(Decimal(r["Cost"]) for r in rows)
    assert page.inner_text("#team-cost") == fmt.money(cost, "USD")
