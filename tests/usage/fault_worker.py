"""The Celery app of the fault tests' workers: the project's own app, plus faults that only tests enable, each on
the batches of one collector, once the batch is claimed (mid-batch, inside its transaction):

- GG_POISON_COLLECTOR: the worker dies on the spot (os._exit: no handler, no rollback, no acknowledgement), as a
  segfault or the OOM killer would kill it;
- GG_SLOW_COLLECTOR: the batch takes GG_SLOW_S seconds more (a task in flight, its message unacknowledged).

Start it as `celery -A tests.usage.fault_worker worker ...`."""

from __future__ import annotations

import os
import time

from celery.signals import task_prerun

from governance.celery import app

__all__ = ["app"]

POISON_EXIT = 70


@task_prerun.connect
def arm_the_faults(**kwargs: object) -> None:
    """Wrap the claim once Django is set up (the first task)."""
    poison, slow = os.environ.get("GG_POISON_COLLECTOR"), os.environ.get("GG_SLOW_COLLECTOR")
    from governance.usage import writer

    if not (poison or slow) or getattr(writer.inbox_claim, "faulty", False):
        return
    from governance.usage.models import IngestBatch

    claim = writer.inbox_claim

    def claim_with_faults(inbox_pk: int) -> tuple[str, bytes, str] | None:
        claimed = claim(inbox_pk)
        if claimed is not None:
            collector = IngestBatch.objects.filter(pk=inbox_pk).values_list("collector", flat=True).first()
            if collector == poison:
                os._exit(POISON_EXIT)
            if collector == slow:
                time.sleep(float(os.environ.get("GG_SLOW_S", "3")))
        return claimed

    claim_with_faults.faulty = True  # type: ignore[attr-defined]
    writer.inbox_claim = claim_with_faults
