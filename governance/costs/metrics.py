"""The costs gauges on /metrics, read from small tables at scrape time: what each team has been charged so far this
month (from the ledger) beside its budget, how far pricing lags behind ingest, and the GPU-hours claimed this month
beyond the GPUs a cluster has. docs/prometheus-rules.yml alerts on them."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Min, Sum
from django.db.models.functions import Now
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from governance.costs.models import Budget, OverClaim, PricingFailure
from governance.costs.selectors import chargeback_by_team
from governance.lib.months import Month
from governance.usage.models import PricingMark


def costs_metrics() -> Iterator[Metric]:
    month = Month.of(timezone.now())
    cost = GaugeMetricFamily(
        "gg_team_cost_month", "Chargeback so far this month, per team.", labels=["team", "currency"]
    )
    for c in chargeback_by_team(month=month):
        cost.add_metric([c.team, c.currency], float(c.cost))
    yield cost

    budget = GaugeMetricFamily(
        "gg_team_budget_month", "The team's budget for this month (teams with one).", labels=["team", "currency"]
    )
    budgets = Budget.objects.filter(month=month.start.date()).values_list("team__name", "currency", "amount")
    for team, currency, amount in budgets:
        budget.add_metric([team, currency], float(amount))
    yield budget

    pending = GaugeMetricFamily("gg_pricing_marks_pending", "Job-days and cluster-days marked and not re-priced yet.")
    pending.add_metric([], PricingMark.objects.count())
    yield pending
    # Measured on the database's clock, which stamped the marks.
    oldest = PricingMark.objects.aggregate(lag=Now() - Min("created_at"))["lag"]
    lag = GaugeMetricFamily("gg_pricing_lag_seconds", "Age of the oldest day waiting to be re-priced (0 if none).")
    lag.add_metric([], max(oldest.total_seconds(), 0.0) if oldest is not None else 0.0)
    yield lag
    failures = GaugeMetricFamily("gg_pricing_failures", "Job-days the pricing pass could not price (retried).")
    failures.add_metric([], PricingFailure.objects.count())
    yield failures

    over = GaugeMetricFamily(
        "gg_overclaim_gpu_hours",
        "GPU-hours claimed this month beyond the GPUs the cluster has (never billed).",
        labels=["cluster", "gpu_model"],
    )
    claims = (
        OverClaim.objects.filter(day__gte=month.start.date(), day__lt=month.end.date())
        .values_list("cluster__name", "gpu_model")
        .annotate(hours=Sum("overclaimed_gpu_hours"))
        .order_by("cluster__name", "gpu_model")
    )
    for cluster, gpu_model, hours in claims:
        over.add_metric([cluster, gpu_model], float(hours))
    yield over
