"""The Celery app of the fault tests' workers: the project's own app, plus faults that only tests enable, each on
the batches of one collector, once the batch is claimed (mid-batch, inside its transaction), alone or in a group of
small batches:

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

    claim, claim_more = writer.inbox_claim, writer.inbox_claim_more

    def faults(pks: list[int]) -> None:
        collectors = set(IngestBatch.objects.filter(pk__in=pks).values_list("collector", flat=True))
        if poison in collectors:
            os._exit(POISON_EXIT)
        if slow in collectors:
            time.sleep(float(os.environ.get("GG_SLOW_S", "3")))

    def claim_with_faults(inbox_pk: int) -> writer.Claimed | None:
        claimed = claim(inbox_pk)
        if claimed is not None:
            faults([inbox_pk])
        return claimed

    def claim_more_with_faults(leader: writer.Claimed, pks: list[int]) -> list[writer.Claimed]:
        claimed = claim_more(leader, pks)
        faults([c.pk for c in claimed])
        return claimed

    claim_with_faults.faulty = True  # type: ignore[attr-defined]
    writer.inbox_claim = claim_with_faults
    writer.inbox_claim_more = claim_more_with_faults
