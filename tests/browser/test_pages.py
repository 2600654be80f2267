import csv
import io
import json
import re
from decimal import Decimal

import pytest

from governance.lib import format as fmt
from tests.browser.conftest import WIDE, chart_points, screenshot, wait_for_charts
from tests.browser.pages import CHROMIUM, OVERVIEW_CHARTS, Page, cases

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (.ci/run installs it from Debian)"),
]


@pytest.mark.parametrize(("target", "role"), cases(), ids=lambda v: v.name if isinstance(v, Page) else v)
def test_every_page_loads_for_each_role_with_data_in_each_chart(page, live_server, world, sign_in, console_errors,
                                                                 target, role):  # fmt: skip
    sign_in(role)

    response = page.goto(live_server.url + target.url.format(**world))
    wait_for_charts(page)

    assert response.status == 200
    drawn = page.eval_on_selector_all("[data-figure]", "els => els.map((el) => el.id)")
    assert sorted(drawn) == sorted(target.charts)
    assert {chart: chart_points(page, chart) > 0 for chart in target.charts} == dict.fromkeys(target.charts, True)
    assert [s for s in target.shows if not page.locator(s).first.is_visible()] == []
    assert console_errors == []
    assert screenshot(page, f"{target.name}-{role}").stat().st_size > 10_000


def test_pages_fill_a_wide_monitor(page, live_server, usage, sign_in, console_errors):
    sign_in("admin")
    page.set_viewport_size(WIDE)

    for name, url in [("overview", "/?month=2026-11"), ("heatmap", "/cluster/?start=2026-11-03&end=2026-11-03")]:
        page.goto(live_server.url + url)
        wait_for_charts(page)
        width = page.evaluate("() => document.querySelector('[data-figure]').getBoundingClientRect().width")
        assert width > 1000
        screenshot(page, f"{name}-admin-wide")
    assert console_errors == []


def test_a_filter_change_redraws_the_chart_and_keeps_it_in_the_link(page, live_server, usage, sign_in):
    sign_in("admin")
    page.goto(live_server.url + "/?month=2026-11")
    wait_for_charts(page)
    before = page.evaluate("() => document.getElementById('cost-per-team').data.map((t) => t.name)")

    with page.expect_navigation():
        page.select_option("select[name=team]", "vision")
    wait_for_charts(page)

    after = page.evaluate("() => document.getElementById('cost-per-team').data.map((t) => t.name)")
    assert before == ["NLP", "Vision"] and after == ["Vision"]
    assert "team=vision" in page.url and "month=2026-11" in page.url


def _iso(text: str) -> str:
    """A chart's axis time ("2026-11-03 10:00", UTC) as the CSV writes it: ISO 8601 UTC."""
    return re.sub(r"^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2})$", r"\1T\2:00Z", text)


def _screen_rows(page, chart_id: str) -> list[list[str]]:
    return [[_iso(cell) for cell in row] for row in _screen_cells(page, chart_id)]


def _screen_cells(page, chart_id: str) -> list[list[str]]:
    return page.evaluate(
        """(id) => document.getElementById(id).data.flatMap((t) => t.type === "heatmap"
            ? t.y.flatMap((y, i) => t.x.map((x, j) => [t.name, String(y), String(x), t.z[i][j]]))
                .filter((r) => r[3] !== null).map((r) => [r[0], r[1], r[2], String(r[3])])
            : (t.q1 ? t.x.map((x, i) => [t.name, String(x), String(t.median[i])])
                    : t.x.map((x, i) => [t.name, String(x), String(t.y[i])])))""",
        chart_id,
    )


@pytest.mark.parametrize(
    ("url", "chart_id", "columns"),
    [
        ("/?month=2026-11", chart, ("series", "x", "median") if chart == "queue-wait" else ("series", "x", "y"))
        for chart in OVERVIEW_CHARTS
    ]
    + [("/cluster/?start=2026-11-03&end=2026-11-03", "heatmap", ("series", "y", "x", "z"))],
)
def test_the_csv_download_returns_the_rows_on_screen(page, live_server, usage, sign_in, url, chart_id, columns):
    sign_in("admin")
    page.goto(live_server.url + url)
    wait_for_charts(page)

    with page.expect_download() as download:
        page.click(f"[data-csv-for='{chart_id}']")

    text = open(download.value.path(), encoding="utf-8").read()
    rows = [[row[c] for c in columns] for row in csv.DictReader(io.StringIO(text))]
    assert download.value.suggested_filename.startswith(chart_id) and download.value.suggested_filename.endswith(".csv")
    assert rows and rows == _screen_rows(page, chart_id)


def test_the_login_form_signs_in_and_lands_on_the_overview(page, live_server, cast, console_errors):
    page.goto(live_server.url + "/")
    page.fill("#id_username", "nlp-lead")
    page.fill("#id_password", "pw-lead-1234")
    with page.expect_navigation():
        page.click("button[type=submit]")

    assert page.url.rstrip("/") == live_server.url
    assert page.is_visible("text=Sign out nlp-lead")
    assert console_errors == []


def _lines(page) -> list[list[str]]:
    return page.eval_on_selector_all("#lines tbody tr", "rows => rows.map((r) => [...r.cells].map((c) => c.innerText))")


def test_a_month_change_on_the_team_page_redraws_its_charts_with_that_months_lines(page, live_server, world, sign_in,
                                                                                   console_errors):  # fmt: skip
    sign_in("nlp_lead")
    page.goto(live_server.url + "/costs/team/nlp/?month=2026-11")
    wait_for_charts(page)
    projects = "() => document.getElementById('cost-by-project').data[0].y"
    before, lines_before = page.evaluate(projects), _lines(page)

    page.fill("input[name=month]", "2026-10")
    with page.expect_navigation():
        page.click("button[type=submit]:has-text('Show')")
    wait_for_charts(page)

    after, lines_after = page.evaluate(projects), _lines(page)
    assert "month=2026-10" in page.url
    assert before == sorted({row[0] for row in lines_before}) and after == sorted({row[0] for row in lines_after})
    assert before != after and chart_points(page, "cost-by-project") > 0
    assert console_errors == []
    screenshot(page, "costs-team-nlp-october-nlp_lead")


def test_the_team_csv_download_holds_the_lines_on_screen(page, live_server, world, sign_in):
    sign_in("nlp_lead")
    page.goto(live_server.url + "/costs/team/nlp/?month=2026-11")
    wait_for_charts(page)

    with page.expect_download() as download:
        page.click("a[download]")

    rows = list(csv.DictReader(open(download.value.path(), encoding="utf-8")))
    sums: dict[tuple[str, str], list[Decimal]] = {}
    for row in rows:
        key = (json.loads(row["Tags"])["project"], row["x_GpuModel"])
        amounts = [Decimal(row[c]) for c in ("PricingQuantity", "BilledCost", "x_IdleCost")]
        sums[key] = [a + b for a, b in zip(sums.get(key, [Decimal(0)] * 3), amounts, strict=True)]
    from_csv = [[*k, fmt.hours(h), fmt.money(c, "USD"), fmt.money(i, "USD")] for k, (h, c, i) in sorted(sums.items())]
    total = sum((Decimal(row["BilledCost"]) for row in rows), Decimal(0))

    assert download.value.suggested_filename == "chargeback-nlp-2026-11.csv"
    assert from_csv and from_csv == _lines(page)
    assert page.locator("#totals tr:has-text('Cost') td").first.inner_text() == fmt.money(total, "USD")


def test_finance_closes_an_ended_month_after_confirming_the_totals_it_freezes(page, live_server, world, sign_in,
                                                                             console_errors):  # fmt: skip
    sign_in("finance")
    page.goto(live_server.url + "/costs/?month=2026-10")
    total = page.inner_text("#month-total")

    with page.expect_navigation():
        page.click("#close-month")
    assert "Closing freezes" in page.inner_text("main") and page.inner_text("#month-total") == total
    with page.expect_navigation():
        page.click("#confirm-close")

    assert "Closed on" in page.inner_text("#status") and "by finance" in page.inner_text("#status")
    assert page.locator("#close-month").count() == 0
    assert console_errors == []


def test_a_lead_acknowledges_a_finding_from_the_findings_page(page, live_server, world, sign_in, console_errors):
    sign_in("nlp_lead")
    page.goto(live_server.url + "/findings/")
    open_before = page.locator(".finding button[value=acknowledged]").count()

    with page.expect_navigation():
        page.locator(".finding button[value=acknowledged]").first.click()

    assert open_before > 0
    assert page.locator(".finding button[value=acknowledged]").count() == open_before - 1
    assert console_errors == []


def test_pages_draw_under_the_content_security_policy_and_a_violation_would_show(page, live_server, usage, sign_in,
                                                                                 console_errors):  # fmt: skip
    sign_in("admin")

    overview = page.goto(live_server.url + "/?month=2026-11")
    wait_for_charts(page)
    drawn_errors = list(console_errors)
    page.goto(live_server.url + "/api/docs/")
    page.wait_for_selector(".swagger-ui .information-container")
    docs_errors = list(console_errors)
    page.evaluate("() => { const s = document.createElement('script'); s.textContent = 'window.x = 1'; "
                  "document.body.appendChild(s); }")  # fmt: skip
    page.wait_for_timeout(200)

    assert "script-src 'self'" in overview.headers["content-security-policy"]
    assert drawn_errors == [] and docs_errors == []
    assert page.evaluate("() => window.x") is None
    assert any("Content Security Policy" in e for e in console_errors), console_errors
