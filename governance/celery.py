import gc
import logging
import os
from contextlib import AbstractContextManager
from fnmatch import fnmatchcase
from typing import Any, TypedDict

from celery import Celery, bootsteps
from celery.signals import task_postrun, task_prerun, task_retry, task_success, worker_init, worker_process_init
from celery.worker import state as worker_state
from celery.worker.consumer import Consumer as CeleryConsumer
from kombu import Connection

from governance.lib.doors import Door, current_door, door_entered

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")

logger = logging.getLogger(__name__)

app = Celery("governance")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def close_old_connections(task=None, **kwargs) -> None:
    """Around each task, what Django does around each request: drop a connection that is too old
    (CONN_MAX_AGE), broken, or left in a failed state, and keep a healthy one for the next task.

    A task run eagerly belongs to its caller's request or transaction, which it must not close.
    """
    if task is None or task.request.is_eager:
        return
    from django.db import close_old_connections as close

    close()


_doors: dict[str, AbstractContextManager[Door]] = {}


@task_prerun.connect
def enter_the_task_door(task_id: str | None = None, task=None, **kwargs) -> None:
    """What a task changes is on record as door `task` with the task's name; a task run eagerly inside a request
    or a command keeps that door (the request's user made the change)."""
    if task is None or task_id is None or current_door() is not None:
        return
    entered = door_entered(Door(kind="task", where=task.name, actor_name=f"task {task.name}"))
    entered.__enter__()
    _doors[task_id] = entered


@task_postrun.connect
def leave_the_task_door(task_id: str | None = None, **kwargs) -> None:
    entered = _doors.pop(task_id or "", None)
    if entered is not None:
        entered.__exit__(None, None, None)


class DeliveryPolicy:
    """Task annotations (CELERY_TASK_ANNOTATIONS) for the tasks whose loss would lose data: ingest and pricing
    (settings.TASK_DELIVERY_PATTERNS). Acknowledged once done, requeued when the worker dies, time-limited so the
    broker's visibility timeout can be sized to fit."""

    def annotate(self, task) -> dict[str, object] | None:
        from django.conf import settings

        name = task.name
        if name in settings.TASK_DELIVERY_EXEMPT:
            return None
        if not any(fnmatchcase(name, pattern) for pattern in settings.TASK_DELIVERY_PATTERNS):
            return None
        limit = settings.TASK_TIME_LIMIT_S
        return {"acks_late": True, "reject_on_worker_lost": True, "time_limit": limit, "soft_time_limit": limit * 0.8}

    def annotate_any(self) -> None:
        return None


def transient_errors() -> tuple[type[Exception], ...]:
    import psycopg
    from django.db import InterfaceError, OperationalError

    return (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)


class RetryOptions(TypedDict):
    autoretry_for: tuple[type[Exception], ...]
    retry_backoff: int
    retry_backoff_max: int
    retry_jitter: bool
    max_retries: int


def transient_retry() -> RetryOptions:
    """Options of a task that retries a transient database error (an outage, a deadlock, a lock it waited for too
    long) with exponential backoff and full jitter: `@shared_task(name=..., **transient_retry())`."""
    from django.conf import settings

    return {
        "autoretry_for": transient_errors(),
        "retry_backoff": 2,
        "retry_backoff_max": settings.TASK_RETRY_BACKOFF_MAX_S,
        "retry_jitter": True,
        "max_retries": settings.TASK_MAX_RETRIES,
    }


@worker_process_init.connect
def freeze_what_is_loaded(**kwargs) -> None:
    """A pool process keeps what it was forked with (the app, its modules) for life: frozen, a full collection in the
    middle of a pricing pass no longer walks it (governance/wsgi.py does the same for the web)."""
    gc.freeze()


@worker_init.connect
def worker_database_sessions(**kwargs) -> None:
    """Worker sessions run with settings.WORKER_DATABASE_SESSION (PostgreSQL), set when they connect."""
    from django.conf import settings
    from django.db import connections

    connection = connections["default"]
    if connection.vendor != "postgresql":
        return
    options = connection.settings_dict.setdefault("OPTIONS", {})
    extra = " ".join(f"-c {name}={value}" for name, value in settings.WORKER_DATABASE_SESSION.items())
    options["options"] = f"{options.get('options', '')} {extra}".strip()
    connection.close()


_database_failed = False


@task_retry.connect
def note_a_database_failure(reason=None, **kwargs) -> None:
    global _database_failed
    if isinstance(getattr(reason, "exc", reason), transient_errors()):  # reason: the Retry, exc: its cause
        _database_failed = True


@task_success.connect
def sweep_once_the_database_answers(sender=None, **kwargs) -> None:
    """A worker process that saw a transient database error has the inbox swept as soon as one of its tasks
    succeeds again: the batches waiting out a long retry backoff are processed within seconds of the database's
    return, not when their countdown ends."""
    global _database_failed
    if not _database_failed or sender is None or sender.request.is_eager:
        return
    _database_failed = False
    try:
        sender.app.send_task("usage.sweep_inbox", kwargs={"older_than_s": 0})
    except Exception:  # beat's sweep follows
        logger.warning("could not enqueue the inbox sweep after the database came back", exc_info=True)


class SweepInboxOnConnect(bootsteps.StartStopStep):
    """Each time a worker of the ingest queue connects to the broker (at start, and back after the broker was
    away) it has the inbox swept at once: the batches a dead worker held unacknowledged, those a restarted broker
    lost and those stored while it was down are processed within seconds, not after the visibility timeout."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def start(self, c) -> None:
        if "ingest" not in c.app.amqp.queues.consume_from:
            return
        try:
            c.app.send_task("usage.sweep_inbox", kwargs={"older_than_s": 0})
        except Exception:  # the consumer must start all the same; beat's sweep follows
            logger.warning("could not enqueue the inbox sweep on connecting", exc_info=True)


app.steps["consumer"].add(SweepInboxOnConnect)


def _not_acknowledged(log: logging.Logger, errors: object, *args: object) -> None:
    log.info("a message received on a lost broker connection stays unacknowledged; it comes back later")


class Consumer(CeleryConsumer):
    """The worker's consumer (settings.CELERY_WORKER_CONSUMER), reconnecting to a broker that went away every
    BROKER_RECONNECT_MAX_S at most. Celery asks kombu for a connection with kombu's default waits (2 s, 4 s, ...
    up to 30 s) and has no setting for them; this passes the cap."""

    def ensure_connected(self, conn: Connection) -> Connection:
        from django.conf import settings

        ensure, cap = conn.ensure_connection, settings.BROKER_RECONNECT_MAX_S

        def capped(*args: Any, **kwargs: Any) -> Connection:
            return ensure(*args, **{"interval_start": 0, "interval_step": 1, "interval_max": cap, **kwargs})

        conn.ensure_connection = capped  # type: ignore[method-assign]
        return super().ensure_connected(conn)

    def on_connection_error_after_connected(self, exc: Exception) -> None:
        """Celery 5.7 closes the connection it has just collected (kombu tears its transport down): whatever then
        touches a channel of that connection raises AttributeError, which stopped the whole worker ("Unrecoverable
        error") instead of reconnecting: the close giving back unacknowledged messages, and the acknowledgement of a
        task in flight when its result comes in after the reconnect. So the close's error is let go, and the tasks
        received on the lost connection are not acknowledged: their messages come back after the visibility timeout
        and find their batches done, and the batches whose messages the broker lost come back at once through the
        inbox sweep this worker has run when it reconnects."""
        for request in list(worker_state.reserved_requests):  # received on the connection now lost
            request._on_ack = request._on_reject = _not_acknowledged
        try:
            super().on_connection_error_after_connected(exc)
        except AttributeError:
            if self.connection is not None:  # not the close of the collected connection: not ours to hide
                raise
            logger.warning("broker connection lost with messages unacknowledged; reconnecting", exc_info=True)
