"""What a rule returns, and the registry every rule module adds itself to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date

from governance.efficiency.summary import JobSummary
from governance.efficiency.thresholds import Thresholds

INFO, WARNING, CRITICAL = "info", "warning", "critical"


@dataclass(frozen=True)
class Draft:
    """A finding as a rule states it, before it meets the database.

    `wasted_hours`: the held GPU-hours the rule says were wasted, per UTC day (governance/efficiency/waste.py
    prices them from the ledger, and what following the advice would have saved over the last 30 days).
    """

    rule: str
    severity: str
    evidence: dict[str, object]
    advice: str
    currency: str = "USD"
    wasted_hours: dict[date, float] = field(default_factory=dict)


Check = Callable[[JobSummary, Thresholds], list[Draft]]


@dataclass
class Registry:
    checks: dict[str, Check] = field(default_factory=dict)

    def register(self, name: str) -> Callable[[Check], Check]:
        def add(check: Check) -> Check:
            if name in self.checks:
                raise ValueError(f"rule {name!r} is registered twice")
            self.checks[name] = check
            return check

        return add


registry = Registry()
rule = registry.register


def pct(value: float) -> str:
    return f"{value:.0f}%" if value >= 10 or value == 0 else f"{value:.1f}%"


def r(value: float, digits: int = 2) -> float:
    """Rounded for evidence, which people read."""
    return round(value, digits)
