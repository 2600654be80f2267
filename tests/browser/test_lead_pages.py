"""What a lead reads end to end (issue 31), at 1280 and 390 px: the budget in words and colour, asking for one, the
forecast formatted with its interval in words and a chart scaled to spend and forecast, utilisation named by what it
measures, the top jobs' key columns on a phone, advice folded to its first line, the navigation folded."""

from __future__ import annotations

import re

import pytest
from django.core import mail

from governance.api.models import AuditEntry
from governance.costs.models import BudgetRequest
from governance.dashboard.budgets import WHO_SETS
from governance.dashboard.utilisation import CLUSTER, TEAM
from tests.browser.conftest import screenshot, wait_for_charts
from tests.browser.pages import CHROMIUM

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (.ci/run installs it from Debian)"),
]

WIDTHS = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}
MONEY = re.compile(r"^-?\d{1,3}(,\d{3})*\.\d{2} USD$")
AMOUNTS = re.compile(r"-?[\d,]+\.\d+ USD")
GREEN, RED = "rgb(0, 158, 115)", "rgb(213, 94, 0)"


def _border(page, selector: str) -> str:
    return page.evaluate("(s) => getComputedStyle(document.querySelector(s)).borderLeftColor", selector)


def _set_budget(cast, amount: str) -> None:
    from governance.costs.services import budget_set
    from governance.lib.months import Month

    budget_set(team=cast.nlp, month=Month.parse("2026-11"), amount=amount, thresholds=[50, 80, 100])


@pytest.mark.parametrize("width", WIDTHS)
def test_leads_read_budget_forecast_and_utilisation_in_words_and_ask_for_a_budget(
    page, live_server, world, cast, sign_in, console_errors, width
):
    page.set_viewport_size(WIDTHS[width])
    sign_in("nlp_lead")
    url = live_server.url + "/costs/team/nlp/?month=2026-11"

    _set_budget(cast, "0.01")  # spent more than that: over, in red
    page.goto(url)
    wait_for_charts(page)
    over = page.inner_text("#budget")
    over_colour = _border(page, "#budget")

    _set_budget(cast, "1000000.00")  # far above spend and forecast: on track, in green
    page.goto(url)
    wait_for_charts(page)

    assert page.inner_text("#budget-state") == "On track" and over.startswith("Budget: Over budget")
    assert (over_colour, _border(page, "#budget")) == (RED, GREEN)
    assert "1,000,000.00 USD" in page.inner_text("#budget-detail")
    # The forecast: every amount formatted as money, the interval in words, the axis fitted to spend and forecast.
    words = page.inner_text("#forecast-numbers")
    assert "80% likely to end between" in words and all(MONEY.match(a) for a in AMOUNTS.findall(words)), words
    names = page.evaluate("() => document.getElementById('forecast').data.map((t) => t.name)")
    assert names == ["80% interval (high)", "80% interval", "Forecast", "Spent", "Budget"]
    top = page.evaluate("() => document.getElementById('forecast')._fullLayout.yaxis.range[1]")
    drawn = page.evaluate("""() => document.getElementById('forecast').data
        .filter((t) => t.name === 'Spent' || t.name === 'Forecast').flatMap((t) => t.y)""")
    assert max(drawn) <= top <= 1.2 * max([*drawn, 1_000_000])
    # Utilisation named by what it measures, the team's beside the cluster's, the definition on hover.
    labels = page.eval_on_selector_all("#utilisation abbr", "els => els.map((e) => [e.innerText, e.title])")
    assert labels == [[TEAM.name, TEAM.explanation], [CLUSTER.name, CLUSTER.explanation]]
    assert all(re.match(r"^\d+\.\d%$", page.inner_text(s)) for s in ("#team-utilisation", "#team-cluster-utilisation"))
    # Energy formatted; carbon not shown while no grid intensity is set.
    assert re.match(r"^[\d,]+\.\d kWh$", page.inner_text("#footprint-kwh"))
    assert page.locator("#footprint-carbon").count() == 0
    # Advice folded to its first line, unfolded by "more".
    page.click("a[href='#findings-section']")  # the table of contents opens a section folded on a phone
    advice = page.locator("#team-findings details.more").first
    line = advice.locator(".first-line")
    folded = line.evaluate("(e) => e.getBoundingClientRect().height")
    advice.locator("summary").click()
    assert advice.evaluate("(d) => d.open")
    assert folded < 2 * line.evaluate("(e) => parseFloat(getComputedStyle(e).lineHeight)")
    if width == "390":  # a phone's line holds a fraction of the advice: unfolded, it takes several
        assert line.evaluate("(e) => e.getBoundingClientRect().height") > 2 * folded
    # The top jobs' job and cost columns on screen, without scrolling sideways.
    boxes = page.evaluate("""() => [...document.querySelectorAll('#top-cost thead th')]
        .filter((th) => ['Job', 'Cost'].includes(th.innerText)).map((th) => th.getBoundingClientRect())
        .map((r) => [r.left, r.right, r.width])""")
    assert len(boxes) == 2 and all(left >= 0 and right <= WIDTHS[width]["width"] and w > 0 for left, right, w in boxes)
    wrap = page.evaluate("() => { const w = document.querySelector('#top-cost').parentElement; "
                         "return w.scrollWidth - w.clientWidth; }")  # fmt: skip
    assert wrap <= 0
    # The navigation: folded behind "Menu" on a phone, shown on a laptop.
    if width == "390":
        assert not page.locator("#site-nav").is_visible()
        page.click("label[for=menu-toggle]")
    assert page.locator("#site-nav").is_visible()
    assert console_errors == []
    screenshot(page, f"lead-budget-forecast-{width}")

    # The same world, another lead: Vision has no budget (one seeded world per width keeps the suite short).
    _a_lead_without_a_budget_sees_it_said_and_asks_finance_for_one(page, live_server, cast, sign_in, console_errors,
                                                                   width)  # fmt: skip


def _a_lead_without_a_budget_sees_it_said_and_asks_finance_for_one(page, live_server, cast, sign_in,
                                                                    console_errors, width: str) -> None:  # fmt: skip
    cast.finance.email = "finance@example.org"
    cast.finance.save()
    sign_in("vision_lead")
    page.goto(live_server.url + "/costs/team/vision/?month=2026-11")

    assert page.inner_text("#budget-state") == "No budget set"
    assert WHO_SETS in page.inner_text("#budget-detail")
    with page.expect_navigation():
        page.click("#ask-budget")

    assert "Asked finance" in page.inner_text("[role=status]")
    assert "vision-lead asked finance for one on 2026-11-04" in page.inner_text("#budget-detail")
    assert page.locator("#ask-budget").count() == 0
    assert BudgetRequest.objects.filter(team=cast.vision, requested_by=cast.vision_lead).count() == 1
    assert AuditEntry.objects.filter(door="page", model="costs.budgetrequest", actor_name="vision-lead").count() == 1
    asked = [m for m in mail.outbox if "Vision asks for a GPU budget for 2026-11" in m.subject]
    assert len(asked) == 1 and asked[0].to == ["finance@example.org"]
    # The overview says it too, in words, for the lead's team.
    page.goto(live_server.url + "/?month=2026-11")
    wait_for_charts(page)
    assert page.locator("#budgets li[data-team=vision]").get_attribute("data-state") == "none"
    assert "No budget set" in page.inner_text("#budgets li[data-team=vision]")
    label = page.locator("#kpi-utilisation").locator("xpath=..").locator("abbr")
    assert (label.inner_text(), label.get_attribute("title")) == (CLUSTER.name, CLUSTER.explanation)
    assert console_errors == []
    screenshot(page, f"lead-asks-budget-{width}")
