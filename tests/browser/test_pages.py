import csv
import io

import pytest

from tests.browser.conftest import WIDE, chart_points, screenshot, wait_for_charts
from tests.browser.pages import CHROMIUM, OVERVIEW_CHARTS, Page, cases

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (.ci/run installs it from Debian)"),
]


@pytest.mark.parametrize(("target", "role"), cases(), ids=lambda v: v.name if isinstance(v, Page) else v)
def test_every_page_loads_for_each_role_with_data_in_each_chart(page, live_server, usage, sign_in, console_errors,
                                                                 target, role):  # fmt: skip
    sign_in(role)

    response = page.goto(live_server.url + target.url)
    wait_for_charts(page)

    assert response.status == 200
    drawn = page.eval_on_selector_all("[data-figure]", "els => els.map((el) => el.id)")
    assert sorted(drawn) == sorted(target.charts)
    assert all(chart_points(page, chart) > 0 for chart in target.charts)
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


def _screen_rows(page, chart_id: str) -> list[list[str]]:
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
