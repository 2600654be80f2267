"""/healthz and /readyz for load balancers and Kubernetes probes; /metrics shows the same checks as gg_ready.

/healthz answers 200 while the process serves requests, touching nothing else. /readyz checks what ingest needs:
the database and the broker answer within READY_TIMEOUT_S, and the inbox backlog (count and oldest age) stays
under its thresholds; 200 with the checks as JSON, 503 when any fails.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Min
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from governance.usage.selectors import inbox_pending

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""
    value: float | None = None
    limit: float | None = None


def _database() -> Check:
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(f"SET LOCAL statement_timeout = {int(settings.READY_TIMEOUT_S * 1000)}")
            cursor.execute("SELECT 1")
    except Exception as exc:
        return Check("database", False, type(exc).__name__)
    return Check("database", True)


def _broker() -> Check:
    url = settings.CELERY_BROKER_URL
    if not url:
        return Check("broker", True, "none: tasks run in-process")
    timeout = settings.READY_TIMEOUT_S
    try:
        if url.startswith(("redis://", "rediss://")):
            import redis

            client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
            try:
                client.ping()
            finally:
                client.close()
        else:
            from governance.celery import app

            with app.connection_for_write() as broker:
                # kombu takes seconds as a float; celery-types says int.
                broker.ensure_connection(max_retries=1, timeout=timeout)  # type: ignore[arg-type]
    except Exception as exc:
        return Check("broker", False, type(exc).__name__)
    return Check("broker", True)


def _inbox(database_ok: bool) -> list[Check]:
    if not database_ok:
        return [Check("inbox_backlog", False, "database down"), Check("inbox_oldest_age", False, "database down")]
    try:
        unprocessed = inbox_pending()
        count = unprocessed.count()
        oldest = unprocessed.aggregate(oldest=Min("received_at"))["oldest"]
    except Exception as exc:
        return [Check("inbox_backlog", False, type(exc).__name__), Check("inbox_oldest_age", False, "")]
    age = (timezone.now() - oldest).total_seconds() if oldest else 0.0
    max_batches, max_age = settings.READY_INBOX_MAX_BATCHES, settings.READY_INBOX_MAX_AGE_S
    return [
        Check("inbox_backlog", not max_batches or count <= max_batches, "batches", count, max_batches or None),
        Check("inbox_oldest_age", not max_age or age <= max_age, "seconds", round(age, 1), max_age or None),
    ]


def readiness() -> list[Check]:
    database = _database()
    return [database, _broker(), *_inbox(database.ok)]


class ProbeMiddleware:
    """Answers /healthz and /readyz ahead of every other middleware: a probe names the pod or container by its
    address (no ALLOWED_HOSTS entry), speaks plain HTTP behind TLS termination, and needs no session."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.probes = {"/healthz": healthz, "/readyz": readyz}

    def __call__(self, request: HttpRequest) -> HttpResponse:
        probe = self.probes.get(request.path_info)
        return probe(request) if probe is not None else self.get_response(request)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> HttpResponse:
    started = time.monotonic()
    checks = readiness()
    ready = all(c.ok for c in checks)
    body = {
        "status": "ok" if ready else "fail",
        "checks": {c.name: {k: v for k, v in asdict(c).items() if k != "name" and v not in ("", None)} for c in checks},
        "took_ms": round((time.monotonic() - started) * 1000, 1),
    }
    if not ready:
        logger.warning("not ready: %s", ", ".join(c.name for c in checks if not c.ok))
    return JsonResponse(body, status=200 if ready else 503)
