from decimal import Decimal

from django import template

from governance.dashboard.nav import nav_links
from governance.lib.money import format_money

register = template.Library()


@register.filter
def money(amount: Decimal | float | int | None, currency: str = "") -> str:
    """1234.5|money:"EUR" -> '1,234.50 EUR' (half-even, once, here on output)."""
    if amount is None:
        return "n/a"
    return format_money(Decimal(str(amount)), currency).strip()


@register.filter
def percent(share: float | None) -> str:
    return "n/a" if share is None else f"{share * 100:.1f}%"


@register.inclusion_tag("dashboard/_nav.html", takes_context=True)
def nav(context: template.Context) -> dict:
    request = context["request"]
    return {"links": nav_links(user=request.user, path=request.path), "user": request.user}
