"""The first load of every page, as a browser with an empty cache fetches it from a server set up as production is
(hashed static files with their brotli and gzip copies, served by WhiteNoise; pages compressed): at most
FIRST_LOAD_LIMIT bytes of transfer, measured by the browser (Resource Timing), at 1280 and 390 px."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client, override_settings
from django.test.testcases import LiveServerThread

from tests.browser.conftest import SCREENSHOTS, wait_for_charts
from tests.browser.pages import CHROMIUM, PAGES

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (.ci/run installs it from Debian)"),
]

FIRST_LOAD_LIMIT = 500_000  # bytes on the wire: the page, its scripts, styles and figures
WIDTHS = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}
# The apps' own static files (the admin's, DRF's and the API docs' are not on these pages).
NOT_ON_PAGES = ["admin", "rest_framework", "drf_spectacular_sidecar"]
SAME_TEMPLATE = {"costs-team-vision", "job-alice", "job-vision", "me-october"}  # as costs-team-nlp, job-nlp, me


@pytest.fixture(scope="module")
def production_server(tmp_path_factory) -> Iterator[str]:
    """A server with the production static set-up: collectstatic into a hashed, compressed STATIC_ROOT, WhiteNoise
    serving it (no Django static handler in front, unlike pytest-django's live_server)."""
    root = tmp_path_factory.mktemp("static")
    hashed = {"BACKEND": "governance.lib.staticstorage.HashedStaticFilesStorage"}
    storages = {**settings.STORAGES, "staticfiles": hashed}
    served = {"WHITENOISE_USE_FINDERS": False, "WHITENOISE_AUTOREFRESH": False, "WHITENOISE_MAX_AGE": 365 * 24 * 3600}
    with override_settings(STATIC_ROOT=root, STORAGES=storages, ALLOWED_HOSTS=["127.0.0.1"], **served):
        call_command("collectstatic", interactive=False, verbosity=0, ignore_patterns=NOT_ON_PAGES)
        thread = LiveServerThread("127.0.0.1", lambda handler: handler, port=0)
        thread.daemon = True
        thread.start()
        thread.is_ready.wait()
        if thread.error:
            raise thread.error
        try:
            yield f"http://127.0.0.1:{thread.port}"
        finally:
            thread.terminate()


FIRST_LOAD = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const resources = performance.getEntriesByType("resource");
  return {bytes: nav.transferSize + resources.reduce((n, r) => n + r.transferSize, 0),
          load_ms: Math.round(nav.loadEventEnd), drawn_ms: Math.round(performance.now()),
          files: [[nav.name, nav.transferSize], ...resources.map((r) => [r.name, r.transferSize])]};
}"""


def first_load(browser, server: str, url: str, role_user, viewport: dict) -> dict:
    """One page in a fresh context (an empty cache), signed in as the user: the bytes it transferred until drawn."""
    context = browser.new_context(viewport=viewport)
    try:
        if role_user is not None:
            client = Client()
            client.force_login(role_user)
            cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": server}])
        page = context.new_page()
        response = page.goto(server + url)
        assert response is not None and response.status == 200, url
        wait_for_charts(page)
        page.wait_for_function("() => performance.getEntriesByType('navigation')[0].loadEventEnd > 0")
        return page.evaluate(FIRST_LOAD)
    finally:
        context.close()


def test_no_page_transfers_more_than_the_limit_on_a_first_load(browser, production_server, world, cast):
    # Every page of tests/browser/pages.py once at 1280 px (one of each template: a second job or month sends the
    # same files), as the first role that opens it; the pages with charts again at 390 px.
    pages: dict[str, tuple[str, str, bool]] = {}
    for p in PAGES:
        if p.name not in SAME_TEMPLATE:
            pages.setdefault(p.url, (p.name, p.roles[0], bool(p.charts)))
    measured = {"login@1280": first_load(browser, production_server, "/accounts/login/", None, WIDTHS["1280"])}
    for width, viewport in WIDTHS.items():
        for url, (name, role, charts) in pages.items():
            if width == "390" and not charts:
                continue
            key = f"{name}{'' if url.count('?') == 0 else ' ' + url.split('?')[1]}@{width}"
            measured[key] = first_load(browser, production_server, url.format(**world), getattr(cast, role), viewport)

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS / "first-load.json").write_text(json.dumps(measured, indent=1))
    for key, m in measured.items():
        print(f"first_load_bytes[{key}]: {m['bytes']}  load_ms: {m['load_ms']}  drawn_ms: {m['drawn_ms']}")
    over = {k: m["bytes"] for k, m in measured.items() if m["bytes"] > FIRST_LOAD_LIMIT}
    assert over == {}
    # The measure is real: every page fetched its stylesheet, and a page with charts its plotly.js.
    assert all(any("app." in name and size > 0 for name, size in m["files"]) for m in measured.values())
