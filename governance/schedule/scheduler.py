"""The embedded default's beat: the same CELERY_BEAT_SCHEDULE, run in a thread of the web process.

With no broker every task runs in-process anyway (always-eager); this runs the periodic ones when due, by
celery's own schedule objects (`is_due`), the way beat does: an entry's first run comes one interval after the
start. Each run is `apply()`, so the tasks' signals (TaskRun) and retries behave as in a worker.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery.schedules import BaseSchedule, schedule
from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

logger = logging.getLogger(__name__)


@dataclass
class Entry:
    name: str
    task: str
    schedule: BaseSchedule
    last_run_at: datetime


def as_schedule(value: object) -> BaseSchedule:
    if isinstance(value, BaseSchedule):
        return value
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)  # type: ignore[arg-type]
    return schedule(run_every=timedelta(seconds=seconds))


class InProcessScheduler:
    def __init__(self, beat_schedule: dict[str, dict], now: datetime | None = None) -> None:
        from governance.celery import app

        self.app = app
        start = now or timezone.now()
        self.entries = []
        for name, spec in beat_schedule.items():
            sched = as_schedule(spec["schedule"])
            sched.nowfun = timezone.now  # type: ignore[attr-defined]  # celery sets nowfun; celery-types lacks it
            self.entries.append(Entry(name=name, task=spec["task"], schedule=sched, last_run_at=start))

    @classmethod
    def from_settings(cls) -> InProcessScheduler:
        return cls(settings.CELERY_BEAT_SCHEDULE)

    def tick(self) -> list[str]:
        """Run every entry that is due, in schedule order; returns the task names run."""
        ran = []
        for entry in self.entries:
            due, _ = entry.schedule.is_due(entry.last_run_at)
            if not due:
                continue
            entry.last_run_at = timezone.now()
            try:
                self.app.tasks[entry.task].apply()
            except Exception:  # apply() stores a task's own error; this is the scheduler's, e.g. a missing task
                logger.exception("periodic task %s could not run", entry.task)
            ran.append(entry.task)
        return ran


def _loop(scheduler: InProcessScheduler, every_s: float) -> None:
    while True:
        time.sleep(every_s)
        try:
            scheduler.tick()
        except Exception:
            logger.exception("the in-process scheduler's tick failed")
        finally:
            close_old_connections()


def scheduler_thread_start() -> threading.Thread:
    thread = threading.Thread(
        target=_loop,
        args=(InProcessScheduler.from_settings(), settings.GOVERNANCE_INPROCESS_SCHEDULER_TICK_S),
        name="gg-scheduler",
        daemon=True,
    )
    thread.start()
    logger.info("in-process scheduler started: %d periodic tasks", len(settings.CELERY_BEAT_SCHEDULE))
    return thread
