"""Writes of the collectors' watch: each collector's last batch, read from the inbox, and its silence announced once.

The check reads only the inbox batches past the newest one it saw (ids grow with the time received), so a pass
costs the batches of the last minute, not the inbox. The inbox keeps processed batches INBOX_RETENTION_DAYS; what
a collector sent before this table existed or before a purge is simply not known.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from governance.notify.services import notification_enqueue
from governance.org.models import User
from governance.usage.models import CollectorStatus, IngestBatch

EVENT = "collector.silent"
TEXT = "Collector {collector} has sent nothing since {last:%Y-%m-%d %H:%M} UTC ({intervals} intervals of {every}s)."


def silence_after() -> timedelta:
    return timedelta(seconds=settings.INGEST_COLLECTOR_INTERVAL_S * settings.INGEST_SILENT_INTERVALS)


@transaction.atomic
def collectors_check(*, now: datetime | None = None) -> list[str]:
    """Bring each collector's last batch up to date; announce each newly silent collector once. Returns the
    collectors announced now."""
    now = now or timezone.now()
    seen = CollectorStatus.objects.aggregate(top=Max("last_batch_pk"))["top"] or 0
    fresh = (
        IngestBatch.objects.filter(pk__gt=seen)
        .values("collector")
        .annotate(last_at=Max("received_at"), last_pk=Max("pk"))
        .order_by()
    )
    for row in fresh:
        CollectorStatus.objects.update_or_create(
            collector=row["collector"],
            defaults={"last_batch_at": row["last_at"], "last_batch_pk": row["last_pk"], "silent_since": None},
        )
    silent = list(
        CollectorStatus.objects.select_for_update()
        .filter(silent_since__isnull=True, last_batch_at__lt=now - silence_after())
        .order_by("collector")
    )
    if silent:
        _announce(silent, now)
    return [s.collector for s in silent]


def _announce(silent: list[CollectorStatus], now: datetime) -> None:
    admins = [
        f"mailto://{email}"
        for email in User.objects.filter(role=User.Role.ADMIN, is_active=True)
        .exclude(email="")
        .values_list("email", flat=True)
    ]
    for status in silent:
        text = TEXT.format(
            collector=status.collector, last=status.last_batch_at, intervals=settings.INGEST_SILENT_INTERVALS,
            every=f"{settings.INGEST_COLLECTOR_INTERVAL_S:g}",
        )  # fmt: skip
        payload = {"collector": status.collector, "last_batch_at": status.last_batch_at.isoformat()}
        notification_enqueue(event=EVENT, payload=payload, text=text, destinations=admins)
    CollectorStatus.objects.filter(pk__in=[s.pk for s in silent]).update(silent_since=now)
