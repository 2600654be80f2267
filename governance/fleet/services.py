"""Writes of the fleet: an admin confirms GPUs seen beyond a cluster's declared capacity."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from governance.fleet.models import Gpu
from governance.lib.enqueue import enqueue_on_commit

# Confirmed GPUs are capacity and billed again from their first report: the costs app re-prices (by task name).
CONFIRMED_TASK = "costs.gpus_confirmed"


def gpus_confirm(*, pks: Iterable[int], now: datetime | None = None) -> list[int]:
    """Confirm these GPUs (they count as capacity and are billed from their first report); returns the ids of those
    that were unconfirmed. The days they touch are re-priced once this commits."""
    now = now or timezone.now()
    with transaction.atomic():
        ids = list(
            Gpu.objects.select_for_update()
            .filter(pk__in=list(pks), unconfirmed=True)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        Gpu.objects.filter(pk__in=ids).update(unconfirmed=False, confirmed_at=now)
        if ids:
            enqueue_on_commit(CONFIRMED_TASK, ids)
    return ids
