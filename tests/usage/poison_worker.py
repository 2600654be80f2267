"""The Celery app of the poison tests' worker: the project's own app, plus a fault that only tests enable. With
GG_POISON_COLLECTOR set, a worker that claims a batch of that collector dies on the spot (os._exit: no handler,
no rollback, no acknowledgement), in the middle of the batch's transaction, as a segfault or the OOM killer would
kill it. Start it as `celery -A tests.usage.poison_worker worker ...`."""

from __future__ import annotations

import os

from celery.signals import task_prerun

from governance.celery import app

__all__ = ["app"]

POISON_EXIT = 70


@task_prerun.connect
def arm_the_poison(**kwargs: object) -> None:
    """Wrap the claim once Django is set up (the first task): dying after it is dying mid-batch."""
    poison = os.environ.get("GG_POISON_COLLECTOR")
    from governance.usage import writer

    if not poison or getattr(writer.inbox_claim, "poisoned", False):
        return
    from governance.usage.models import IngestBatch

    claim = writer.inbox_claim

    def claim_or_die(inbox_pk: int) -> tuple[str, bytes, str] | None:
        claimed = claim(inbox_pk)
        if claimed is not None and IngestBatch.objects.filter(pk=inbox_pk, collector=poison).exists():
            os._exit(POISON_EXIT)
        return claimed

    claim_or_die.poisoned = True  # type: ignore[attr-defined]
    writer.inbox_claim = claim_or_die
