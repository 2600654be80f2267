from decimal import Decimal

from django import template

from governance.dashboard.nav import nav_links
from governance.lib import format as fmt

register = template.Library()


@register.filter
def money(amount: Decimal | float | int | None, currency: str = "") -> str:
    """1234.5|money:"EUR" -> '1,234.50 EUR' (half-even, once, here on output)."""
    return fmt.money(amount, currency)


@register.filter
def percent(share: float | None) -> str:
    return fmt.pct(share)


@register.inclusion_tag("dashboard/_nav.html", takes_context=True)
def nav(context: template.Context) -> dict:
    request = context["request"]
    return {"links": nav_links(user=request.user, path=request.path), "user": request.user}
