"""Enqueue a Celery task by its name once the current transaction commits.

A service that needs work done by another app's task names it here instead of importing that tasks module, so
imports only run down the data path. Without a broker the task runs in-process (always-eager), right after the
commit. A broker that is down loses nothing: the periodic sweep of the same work picks it up.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.db import transaction

if TYPE_CHECKING:
    from celery import Task

logger = logging.getLogger(__name__)


def task_named(name: str) -> Task:
    """The registered task called `name`, for a caller that needs to send it with its own options."""
    from governance.celery import app

    return app.tasks[name]


def enqueue(name: str, *args: object) -> None:
    try:
        task_named(name).apply_async(args=args)
    except Exception:  # the broker is down: the periodic sweep of the same work is the fallback
        logger.warning("could not enqueue %s; its periodic sweep will do the work", name, exc_info=True)


def enqueue_on_commit(name: str, *args: object) -> None:
    transaction.on_commit(lambda: enqueue(name, *args))
