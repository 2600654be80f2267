"""Template filters for every number on a page: {{ cost|money:currency }}, {{ h|hours }}, {{ share|pct }}."""

from __future__ import annotations

from decimal import Decimal

from django import template

from governance.lib import format as fmt

register = template.Library()


@register.filter
def money(amount: Decimal | float | int | None, currency: str = "") -> str:
    return fmt.money(amount, currency)


@register.filter
def hours(value: Decimal | float | int | None) -> str:
    return fmt.hours(value)


@register.filter
def pct(share: Decimal | float | None) -> str:
    return fmt.pct(share)


@register.filter
def number(value: Decimal | float | int | None, digits: int = 1) -> str:
    return fmt.number(value, digits)


@register.filter
def gpus(value: Decimal | float | int | None) -> str:
    return fmt.gpus(value)


@register.filter
def get(mapping: dict, key: object) -> object:
    return mapping.get(key) if mapping else None


@register.filter
def finding_title(rule: str) -> str:
    from governance.dashboard.advice import title

    return title(rule)


@register.filter
def evidence(evidence: dict, currency: str = "") -> list[tuple[str, str, str]]:
    from governance.dashboard.advice import evidence_rows

    return evidence_rows(evidence, currency)


@register.inclusion_tag("dashboard/_measure.html")
def measure(scope: str) -> dict:
    """{% measure "cluster" %}: the measure's name, its definition on hover (governance/dashboard/utilisation.py)."""
    from governance.dashboard.utilisation import MEASURES

    return {"m": MEASURES[scope]}
