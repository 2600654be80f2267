"""In Chromium: finance closes a month on the page, and an admin finds the close on the audit page, finance as its
actor."""

import pytest

from tests.browser.pages import CHROMIUM

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (.ci/run installs it from Debian)"),
]


def test_finance_closes_a_month_on_the_page_and_the_close_is_on_the_audit_page(page, live_server, world, sign_in,
                                                                               today):  # fmt: skip
    sign_in("finance")
    page.goto(live_server.url + "/costs/?month=2026-10")
    page.click("#close-month")
    page.click("#confirm-close")
    page.wait_for_selector("text=frozen")

    sign_in("admin")
    page.goto(live_server.url + "/")
    page.click("nav >> text=Audit")
    page.fill("input[name=kind]", "costs.monthclose")
    page.click("#audit-filters button[type=submit]")

    rows = page.locator("#audit-entries tbody tr")
    assert rows.count() == 1
    cells = rows.first.locator("td").all_inner_texts()
    assert cells[1:2] == ["page"] and cells[3] == "finance" and cells[4] == "close"
    assert "/costs/close/2026-10/" in cells[2] and "2026-10-01" in cells[7]
