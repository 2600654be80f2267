"""The chargeback's gauge on /metrics: what each team has been charged so far this month (from the ledger)."""

from __future__ import annotations

from collections.abc import Iterator

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from governance.costs.selectors import chargeback_by_team
from governance.lib.months import Month


def team_cost_metrics() -> Iterator[Metric]:
    cost = GaugeMetricFamily(
        "gg_team_cost_month", "Chargeback so far this month, per team.", labels=["team", "currency"]
    )
    for c in chargeback_by_team(month=Month.of(timezone.now())):
        cost.add_metric([c.team, c.currency], float(c.cost))
    yield cost
