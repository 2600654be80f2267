"""The navigation every page shows. Append a NavItem for a new page; names that do not resolve yet are skipped."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.urls import NoReverseMatch, reverse

from governance.org.models import User
from governance.org.selectors import teams_led


def _everyone(user: User) -> bool:
    return True


@dataclass(frozen=True)
class NavItem:
    label: str
    url_name: str
    shown_to: Callable[[User], bool] = _everyone


NAV: list[NavItem] = [
    NavItem("Overview", "dashboard:overview"),
    NavItem("My jobs", "dashboard:me"),
    NavItem("Cluster", "dashboard:heatmap"),
    NavItem("Chargeback", "costs:month"),
    NavItem("Unattributed", "costs:unattributed", lambda user: user.sees_all_costs),
    NavItem("Findings", "efficiency:findings"),
    NavItem("Remediation", "dashboard:remediation", lambda user: user.sees_all_costs or teams_led(user=user).exists()),
    NavItem("API", "v1:root"),
    NavItem("Admin", "admin:index", lambda user: user.is_staff),
    NavItem("Audit", "dashboard:audit", lambda user: user.is_platform_admin),
    NavItem("Password", "password_change"),
]


def nav_links(*, user: User, path: str) -> list[tuple[str, str, bool]]:
    """(label, url, current) for the items this user may open whose page exists in this build."""
    links = []
    for item in NAV:
        if not item.shown_to(user):
            continue
        try:
            url = reverse(item.url_name)
        except NoReverseMatch:
            continue
        current = path == url if url == "/" else path.startswith(url)
        links.append((item.label, url, current))
    return links
