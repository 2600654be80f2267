"""Writes of the outbox: queue an event for its destinations, deliver what is due with backoff."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from governance.lib.enqueue import enqueue_on_commit
from governance.notify.delivery import DeliveryFailed, deliver
from governance.notify.models import OutboxMessage

logger = logging.getLogger(__name__)

DELIVER_TASK = "notify.deliver_due"
GAVE_UP = "gave up after {attempts} attempts: {error}"
# A claimed row is not claimed again for this long: another worker's delivery of it is in flight.
LEASE = timedelta(minutes=2)


def notify_destinations(*extra: str) -> list[str]:
    """The destinations every event goes to (the setting) after the ones the event names, without repeats."""
    out: list[str] = []
    for url in (*extra, *settings.GOVERNANCE_NOTIFY_DESTINATIONS):
        if url and url not in out:
            out.append(url)
    return out


def notification_enqueue(
    *, event: str, payload: dict, text: str = "", destinations: Iterable[str] | None = None
) -> list[OutboxMessage]:
    """One outbox row per destination, in the caller's transaction; delivery is tried right after the commit."""
    targets = notify_destinations() if destinations is None else notify_destinations(*destinations)
    if not targets:
        return []
    now = timezone.now()
    rows = OutboxMessage.objects.bulk_create(
        [OutboxMessage(event=event, destination=d, payload=payload, text=text, next_attempt_at=now) for d in targets]
    )
    enqueue_on_commit(DELIVER_TASK)
    return rows


def backoff(attempts: int) -> timedelta:
    """Wait after the n-th failed attempt: base x 2^(n-1), at most the maximum."""
    base = settings.GOVERNANCE_NOTIFY_RETRY_BASE_S
    return timedelta(seconds=min(base * 2 ** (attempts - 1), settings.GOVERNANCE_NOTIFY_RETRY_MAX_S))


def outbox_deliver_due(*, now: datetime | None = None, limit: int = 100) -> int:
    """Deliver the due rows (claimed first, so two workers never send one twice at once); returns how many
    were delivered. The HTTP calls run outside any transaction."""
    now = now or timezone.now()
    with transaction.atomic():
        due = list(
            OutboxMessage.objects.select_for_update(skip_locked=True)
            .filter(delivered_at__isnull=True, next_attempt_at__lte=now)
            .order_by("next_attempt_at", "id")[:limit]
        )
        OutboxMessage.objects.filter(pk__in=[m.pk for m in due]).update(next_attempt_at=now + LEASE)
    delivered = 0
    for message in due:
        message.attempts += 1
        try:
            deliver(destination=message.destination, event=message.event, payload=message.payload, text=message.text)
        except DeliveryFailed as exc:
            message.last_error = str(exc)[:2000]
            if message.attempts >= settings.GOVERNANCE_NOTIFY_MAX_ATTEMPTS:
                message.next_attempt_at = None
                message.last_error = GAVE_UP.format(attempts=message.attempts, error=message.last_error)
                logger.error("notification %s to %s: %s", message.pk, message.destination, message.last_error)
            else:
                message.next_attempt_at = now + backoff(message.attempts)
                logger.warning("notification %s to %s failed: %s", message.pk, message.destination, exc)
        else:
            message.delivered_at, message.next_attempt_at, message.last_error = timezone.now(), None, ""
            delivered += 1
        message.save(update_fields=["attempts", "last_error", "next_attempt_at", "delivered_at"])
    return delivered
