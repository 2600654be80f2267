"""Each periodic task's last run, from celery's own signals: they fire in workers and for apply() alike."""

from __future__ import annotations

import logging

from celery.signals import task_failure, task_postrun, task_prerun
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

logger = logging.getLogger(__name__)


def periodic_tasks() -> set[str]:
    return {str(entry["task"]) for entry in settings.CELERY_BEAT_SCHEDULE.values()}


def _write(name: str, **fields: object) -> None:
    from governance.schedule.models import TaskRun

    if name not in periodic_tasks():
        return
    try:
        with transaction.atomic():  # a savepoint: a failed write never breaks the task's own transaction
            TaskRun.objects.get_or_create(task=name)
            TaskRun.objects.filter(task=name).update(**fields)
    except Exception:  # the record is a convenience; the task itself must not fail for it
        logger.debug("could not record the run of %s", name, exc_info=True)


@task_prerun.connect
def _started(sender=None, **kwargs) -> None:
    _write(sender.name, last_started_at=timezone.now(), outcome="running", runs=F("runs") + 1)


@task_postrun.connect
def _finished(sender=None, state: str | None = None, retval: object = None, **kwargs) -> None:
    if state == "SUCCESS":
        _write(sender.name, last_finished_at=timezone.now(), outcome="success", result=repr(retval)[:500], error="")


@task_failure.connect
def _failed(sender=None, exception: BaseException | None = None, **kwargs) -> None:
    _write(sender.name, last_finished_at=timezone.now(), outcome="failure", error=repr(exception)[:2000],
           failures=F("failures") + 1)  # fmt: skip
