"""Playwright on the system Chromium against the live server: signed-in pages, console errors, screenshots."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from tests.dashboard.conftest import small_cluster_usage

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
            : (t.q1 || t.y || []).filter((v) => v !== null).length), 0)""",
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
