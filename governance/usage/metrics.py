"""/metrics in the Prometheus text format, read from the database (and the broker) at scrape time.

Usage owns the ingest gauges here: a partial index for the inbox, one row per GPU for the lag, the rollup rows
of the last hour, LLEN per queue, all cheap at any scale. Other apps register their own gauges through
governance/lib/metrics.py (costs: gg_team_cost_month, from the ledger); this view reads them without importing
those apps. An autoscaler adds ingest workers on `gg_celery_queue_depth{queue="ingest"}`.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Max, Min, Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from governance.fleet.models import Gpu
from governance.lib.metrics import metrics_sources
from governance.usage.health import readiness
from governance.usage.models import GpuHour
from governance.usage.selectors import inbox_dead, inbox_pending

logger = logging.getLogger(__name__)

QUEUES = ("ingest", "analysis")


def queue_depths() -> dict[str, int]:
    """Messages waiting per Celery queue; empty unless the broker is Redis."""
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        return {}
    import redis

    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        return {queue: int(client.llen(queue)) for queue in QUEUES}
    finally:
        client.close()


class GovernanceCollector:
    def collect(self) -> Iterator[Metric]:
        ready = GaugeMetricFamily("gg_ready", "1 while a check of /readyz passes, else 0.", labels=["check"])
        for check in readiness():
            ready.add_metric([check.name], 1.0 if check.ok else 0.0)
        yield ready

        now = timezone.now()
        unprocessed = inbox_pending()
        backlog = unprocessed.aggregate(n=Sum("record_count"), oldest=Min("received_at"))
        batches = GaugeMetricFamily(
            "gg_inbox_backlog_batches", "Ingest batches waiting for a worker (dead ones apart)."
        )
        batches.add_metric([], unprocessed.count())
        yield batches
        records = GaugeMetricFamily("gg_inbox_backlog_records", "Records in the batches waiting for a worker.")
        records.add_metric([], backlog["n"] or 0)
        yield records
        age = GaugeMetricFamily(
            "gg_inbox_oldest_age_seconds", "Age of the oldest batch waiting for a worker (0 if none)."
        )
        age.add_metric([], (now - backlog["oldest"]).total_seconds() if backlog["oldest"] else 0.0)
        yield age
        dead = GaugeMetricFamily(
            "gg_inbox_dead_batches", "Ingest batches set aside after INGEST_MAX_ATTEMPTS failures (re-queue them)."
        )
        dead.add_metric([], inbox_dead().count())
        yield dead

        try:
            depths = queue_depths()
        except Exception:  # the broker being down is exactly when this page must still answer
            logger.warning("could not read Celery queue depths", exc_info=True)
            depths = {}
        depth = GaugeMetricFamily("gg_celery_queue_depth", "Messages waiting in a Celery queue.", labels=["queue"])
        for queue, n in depths.items():
            depth.add_metric([queue], n)
        yield depth

        newest = Gpu.objects.aggregate(newest=Max("last_seen_at"))["newest"]
        lag = GaugeMetricFamily("gg_ingest_lag_seconds", "Now minus the newest sample time ingested, any GPU.")
        if newest is not None:
            lag.add_metric([], max((now - newest).total_seconds(), 0.0))
        yield lag

        hour = now.replace(minute=0, second=0, microsecond=0)
        recent = GpuHour.objects.filter(hour__gte=hour - timedelta(hours=1)).aggregate(n=Sum("samples"))["n"]
        last_hours = GaugeMetricFamily(
            "gg_samples_ingested_recent", "Samples folded into the rollups for the previous and current hour."
        )
        last_hours.add_metric([], recent or 0)
        yield last_hours
        if connection.vendor == "postgresql":
            # The primary's statistics: a replica counts none of the rows it replays.
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT coalesce(sum(n_tup_ins), 0) FROM pg_stat_user_tables"
                    " WHERE schemaname = current_schema() AND (relname = %s OR relname LIKE %s)",
                    ["usage_sample", "usage\\_sample\\_y%"],
                )
                inserted = cursor.fetchone()[0]
            total = CounterMetricFamily(
                "gg_samples_inserted", "Sample rows inserted (PostgreSQL statistics; resets with them)."
            )
            total.add_metric([], float(inserted))
            yield total

        for source in metrics_sources():  # the gauges other apps own (costs: gg_team_cost_month, pricing, over-claims)
            yield from source()


def _authorized(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    if not token:
        return False
    given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    return hmac.compare_digest(given.encode(), token.encode())


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Off (404) unless METRICS_TOKEN is set; then only with `Authorization: Bearer <METRICS_TOKEN>`."""
    if not settings.METRICS_TOKEN:
        raise Http404("metrics are off: set METRICS_TOKEN")
    if not _authorized(request):
        return HttpResponse(
            "metrics need Authorization: Bearer <METRICS_TOKEN>\n", status=401, content_type="text/plain"
        )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GovernanceCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
