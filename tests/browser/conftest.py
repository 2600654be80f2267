"""Playwright on the system Chromium against the live server: signed-in pages, console errors, screenshots."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import time_machine
from django.conf import settings
from django.test import Client

from tests.dashboard.conftest import small_cluster_usage
from tests.factories import at, ingest, job_record, series

SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"
LAPTOP = {"width": 1366, "height": 768}
WIDE = {"width": 2560, "height": 1200}


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": LAPTOP, "accept_downloads": True}


@pytest.fixture
def usage(cast):
    small_cluster_usage()


# The day the world is looked at: November's usage is in the cluster page's last seven days, October has ended.
TODAY = "2026-11-04T12:00:00Z"


@pytest.fixture
def today():
    """The clock on TODAY, ticking (a journey's pages and its ingest see the same day)."""
    with time_machine.travel(TODAY, tick=True):
        yield


@pytest.fixture
def world(cast) -> Iterator[dict[str, int]]:
    """Every page's data, through the real ingest path: the small cluster of 3 Nov, an October job of alice's
    that left a GPU idle, findings evaluated, budgets for NLP; the clock on TODAY. Yields {placeholder: job pk}."""
    from governance.costs.services import budget_set
    from governance.efficiency.services import findings_evaluate_all
    from governance.lib.months import Month
    from governance.usage.models import Job

    with time_machine.travel(TODAY, tick=True):
        small_cluster_usage()
        start = at("2026-10-20T08:00:00Z")
        ingest(
            [
                job_record(job_id="4", user="alice", project="llm-eval", gpus=2, submit_time="2026-10-20T07:50:00Z",
                           start_time="2026-10-20T08:00:00Z", end_time="2026-10-20T12:00:00Z", state="completed"),
                *series(start=start, minutes=240, every_s=600, job_id="4", sm_util=70.0, power_w=400.0),
                *series(start=start, minutes=240, every_s=600, job_id="4", gpu_uuid="GPU-1", gpu_index=1,
                        sm_util=0.0, power_w=60.0),
            ]
        )  # fmt: skip
        findings_evaluate_all(now=at(TODAY))
        for month, amount in [("2026-10", "40.00"), ("2026-11", "30.00")]:
            budget_set(team=cast.nlp, month=Month.parse(month), amount=amount, thresholds=[50, 80, 100])
        jobs = dict(Job.objects.values_list("external_id", "pk"))
        yield {"nlp_job": jobs["2"], "alice_job": jobs["4"], "vision_job": jobs["3"]}


@pytest.fixture
def console_errors(page) -> list[str]:
    """Console errors and uncaught exceptions of the page, in order."""
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


@pytest.fixture
def sign_in(page, live_server, cast) -> Callable[[str], None]:
    """Signs the page in as one of the cast by its session cookie (the login form is tested once, below)."""

    def _sign_in(role: str) -> None:
        client = Client()
        client.force_login(getattr(cast, role))
        cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
        page.context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}])

    return _sign_in


def chart_points(page, chart_id: str) -> int:
    """Data points the plotly div holds, as the browser sees them (heatmaps: non-empty cells)."""
    return page.evaluate(
        """(id) => document.getElementById(id).data.reduce((n, t) => n + (t.type === "heatmap"
            ? t.z.flat().filter((v) => v !== null).length
            : t.type === "indicator" ? (t.value === null || t.value === undefined ? 0 : 1)
            : (t.q1 || (t.orientation === "h" ? t.x : t.y) || []).filter((v) => v !== null).length), 0)""",
        chart_id,
    )


def wait_for_charts(page) -> None:
    page.wait_for_function(
        """() => [...document.querySelectorAll("[data-figure]")].every((el) => el.dataset.drawn === "true")"""
    )


def screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
