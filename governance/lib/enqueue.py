"""Enqueue a Celery task by its name once the current transaction commits.

A service that needs work done by another app's task names it here instead of importing that tasks module, so
imports only run down the data path. Without a broker the task runs in-process (always-eager), right after the
commit. A broker that is down loses nothing: the periodic sweep of the same work picks it up.
"""

from __future__ import annotations

import logging
import time
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


_window_sent: dict[str, int] = {}  # per task name: the last window this process sent a coalesced message for


def enqueue_coalesced_on_commit(name: str, *, every_s: float) -> None:
    """Enqueue `name` (no arguments) once the current transaction commits, at most once per window of `every_s`
    seconds from this process: the window's first commit sends one message due at the window's end, which covers
    every commit of the window (each came before the message is run). For work that reads what the commits left
    (pricing marks) rather than what each one names. Eager (no broker) or `every_s` 0: once per commit, at once."""
    transaction.on_commit(lambda: _coalesced(name, every_s))


def _coalesced(name: str, every_s: float) -> None:
    task = task_named(name)
    if every_s <= 0 or task.app.conf.task_always_eager:
        enqueue(name)
        return
    now = time.time()
    window = int(now // every_s)
    if _window_sent.get(name) == window:
        return
    try:
        task.apply_async(countdown=(window + 1) * every_s - now)
    except Exception:  # the broker is down: the next commit tries again, and the periodic sweep covers the rest
        logger.warning("could not enqueue %s; its periodic sweep will do the work", name, exc_info=True)
        return
    _window_sent[name] = window
