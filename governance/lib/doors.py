"""Which door a change comes through, and who comes through it: the audit log's context.

Every way in sets the door once, where the request, command or task starts: a middleware for pages, the admin and
the API; `AuditedCommand` for management commands; the Celery task signals for tasks; the ingest worker for the
job records a token sent. The audit recorder reads it wherever a write happens, so no view, command or service has
to pass it along (and none can forget to).
"""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from django.core.management.base import BaseCommand


@dataclass(frozen=True)
class Door:
    """Where a change came from. `kind`: page, admin, api, command, ingest or task; `where`: the path, command or
    task name; `request`: the HTTP request whose user and token say who (read when a write happens, after the
    API's authentication ran); else `actor_name`, and for ingest the token's id and name."""

    kind: str
    where: str = ""
    address: str | None = None
    request: Any = field(default=None, compare=False, repr=False)
    actor_name: str = ""
    user_id: int | None = None
    token_id: int | None = None
    token_name: str = ""


_door: ContextVar[Door | None] = ContextVar("audit_door", default=None)


def current_door() -> Door | None:
    return _door.get()


@contextmanager
def door_entered(door: Door) -> Iterator[Door]:
    """Changes made inside this block came through `door`."""
    reset = _door.set(door)
    try:
        yield door
    finally:
        _door.reset(reset)


def os_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name (a container without one): still say it was a command
        return "unknown"


class AuditedCommand(BaseCommand):
    """The base of every management command of the project: what it changes is on record as door `command`, with
    the command's name and the operating-system account that ran it (tests/api/test_audit_doors.py checks every
    command derives from it)."""

    def execute(self, *args: Any, **options: Any) -> str | None:
        name = type(self).__module__.rpartition(".")[2]
        with door_entered(Door(kind="command", where=name, actor_name=os_user())):
            return super().execute(*args, **options)
