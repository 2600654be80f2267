"""What each role came for, in Chromium: the lead's top jobs and findings, the engineer's advice in two clicks,
finance's last complete month in one, one total everywhere, and no sideways scroll on a phone."""

import csv
import json
from decimal import Decimal

import pytest

from governance.lib import format as fmt
from tests.browser.conftest import screenshot, wait_for_charts
from tests.browser.pages import CHROMIUM

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (.ci/run installs it from Debian)"),
]
PHONE = {"width": 390, "height": 844}


def test_a_lead_sees_the_teams_top_jobs_with_their_advice_and_its_findings_by_job(page, live_server, world,
                                                                                  sign_in, today):  # fmt: skip
    sign_in("nlp_lead")
    page.goto(live_server.url + "/costs/team/nlp/?month=2026-11")

    top = page.eval_on_selector_all("#top-cost tbody tr", "rows => rows.map((r) => r.cells[0].innerText)")
    groups = page.locator("#team-findings .job-group h3 a").all_inner_texts()
    assert top and all(job.startswith("c1/") for job in top)
    assert groups and set(groups) <= set(top) | {f"c1/{n}" for n in "1234"}
    advice = page.locator("#top-cost tbody tr td:nth-child(8)").all_inner_texts()  # the change that saves most
    assert any(a != "no open finding" for a in advice)

    with page.expect_download() as download:
        page.click("[data-csv-table='top-cost']")
    rows = list(csv.DictReader(open(download.value.path(), encoding="utf-8")))
    on_screen = page.eval_on_selector_all(
        "#top-cost tbody tr", "rows => rows.map((r) => [...r.cells].map((c) => c.innerText))"
    )

    def money(text: str, currency: str) -> str:
        return fmt.money(Decimal(text), currency) if text else fmt.UNKNOWN

    # The CSV is data (plain decimals, the currency in its own column); written the page's way it is the screen.
    assert [[r["Job"], r["User"], r["Project"], fmt.hours(Decimal(r["GPU-hours"])), money(r["Cost"], r["Currency"]),
             money(r["Idle cost"], r["Currency"]), f"{Decimal(r['Idle %'])}%", r["The change that would save most"],
             money(r["Saving, last 30 days"], r["Currency"])] for r in rows] == on_screen  # fmt: skip


def test_an_engineer_signs_in_to_their_jobs_and_reaches_the_advice_of_the_costliest_in_two_clicks(
    page, live_server, world, cast, today, console_errors
):
    page.goto(live_server.url + "/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw-alice-1234")
    with page.expect_navigation():
        page.click("button[type=submit]")  # click 1: sign in, land on /me/
    assert page.url.startswith(live_server.url + "/me/")
    page.click("#month-previous")  # October: alice's job that left a GPU idle
    page.wait_for_url("**/me/?month=2026-10")

    with page.expect_navigation():
        page.click("#costliest-job")  # the job page

    assert page.locator("#job-summary").is_visible()
    first = page.locator(".finding").first
    assert first.locator(".finding-title").inner_text() in {"GPUs held while idle", "More GPUs requested than used"}
    assert first.locator(".advice").inner_text()
    assert "Cost so far" not in page.inner_text("#job-summary thead")  # a finished job: its cost
    assert console_errors == []


def test_finance_downloads_the_last_complete_month_in_one_click(page, live_server, world, sign_in, today):
    sign_in("finance")
    page.goto(live_server.url + "/costs/")

    with page.expect_download() as download:
        page.click("#statement-csv")

    assert "2026-10" in page.inner_text("h1")
    rows = list(csv.DictReader(open(download.value.path(), encoding="utf-8")))
    assert rows and {r["BillingPeriodStart"][:7] for r in rows} == {"2026-10"}


def test_a_team_and_month_total_is_the_same_on_the_overview_the_team_page_the_api_and_the_csv(
    page, live_server, world, sign_in, today
):
    sign_in("nlp_lead")
    page.goto(live_server.url + "/?month=2026-11&team=nlp")
    wait_for_charts(page)
    overview = page.inner_text("#kpi-cost")
    page.goto(live_server.url + "/costs/team/nlp/?month=2026-11")
    team_page = page.locator("#totals tr:has-text('Cost') td").first.inner_text()
    api = json.loads(page.context.request.get(live_server.url + "/api/v1/chargeback/?month=2026-11&team=nlp").text())
    with page.expect_download() as download:
        page.click("#focus-csv")
    rows = list(csv.DictReader(open(download.value.path(), encoding="utf-8")))
    from_csv = fmt.money(sum((Decimal(r["BilledCost"]) for r in rows), Decimal(0)), "USD")

    assert overview == team_page == fmt.money(Decimal(api[0]["cost"]), api[0]["currency"]) == from_csv


@pytest.mark.parametrize(
    ("role", "url"),
    [
        ("admin", "/?month=2026-11"),
        ("admin", "/cluster/?start=2026-11-03&end=2026-11-03"),
        ("finance", "/costs/?month=2026-10"),
        ("nlp_lead", "/costs/team/nlp/?month=2026-11"),
        ("nlp_lead", "/findings/"),
        ("alice", "/me/?month=2026-10"),
        ("nlp_lead", "/jobs/{nlp_job}/"),
    ],
)
def test_a_phone_never_scrolls_the_page_sideways(page, live_server, world, sign_in, today, role, url):
    sign_in(role)
    page.set_viewport_size(PHONE)
    page.goto(live_server.url + url.format(**world))
    wait_for_charts(page)

    overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0
    assert page.locator(".modebar-container .modebar").count() == 0  # no toolbar over the titles
    screenshot(page, "phone-" + url.strip("/").split("/")[0].split("?")[0].replace("?", "") + f"-{role}")
