"""Pages and API reads may read a PostgreSQL streaming replica (DATABASE_REPLICA_URL); every write goes to the primary.

A reading request (GET, HEAD, OPTIONS) reads through the ORM from the replica, unless:
- the user wrote something that the replica has not replayed yet: every write of a signed-in user leaves the
  primary's WAL position after it in a row of the user's on the primary (api.WriteMark), which one upsert only
  ever moves forward, and that user's reads go to the primary until the replica's replay position has passed it
  (a user always reads their own writes: in another tab or browser too, and of two writes in flight at once the
  later position stays whichever answers last). A browser's writing request also answers with a cookie holding
  that position, which decides before the session is read. An ingest token's writes leave no mark: it reads
  nothing, and the samples it sends are priced later anyway;
- it authenticates with an API token: the token is looked up on the primary (one revoked or just issued counts
  at once), and only then do its reads go to the replica;
- it reads who the user is or what they may see: sessions, users, groups and permissions, team memberships,
  sign-in identities and API tokens are always read on the primary (ACCESS_MODELS), so that a user signed out,
  deactivated or taken off a team is refused at once, not once the replica has replayed it;
- the replica does not answer (down, restarting): the primary serves the read;
- the request wrote (a GET that records something), or runs inside a transaction on the primary: the rest of it
  reads the primary.

Raw SQL that a page reads with (the heatmap's cells, the queue-wait boxes, the FOCUS CSV) runs on
`reading_connection(Model)`, the connection the router gives that model's reads now, so it follows the same rules;
its vendor check looks at that connection. Raw SQL that writes, or that a write depends on, runs on
`django.db.connection`: the primary. So do counting a request (governance/api/counters.py) and the users' marks
above; neither sends the rest of the request to the primary: they are the primary's own state, which the replica
only trails. The database cache's table is always read on the primary too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextvars import ContextVar
from datetime import timedelta
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

REPLICA = "replica"
COOKIE = "gg_wrote_lsn"
# The cookie outlives any sane replication lag; past it the user reads whatever the replica has.
COOKIE_MAX_AGE_S = 600
# The same position for a signed-in user, on the primary (api.WriteMark): as long.
MARK_TTL_S = COOKIE_MAX_AGE_S
# Where the shared cache keeps its rows when it is the database's (DatabaseCache's model).
CACHE_APP_LABEL = "django_cache"
# Reads that decide who a request is and what it may see, whatever else it reads: on the primary.
ACCESS_APPS = frozenset({CACHE_APP_LABEL, "sessions", "auth"})
ACCESS_MODELS = frozenset({"org.user", "org.membership", "org.oidcidentity", "api.apitoken", "api.writemark"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_LSN = re.compile(r"^[0-9A-F]{1,8}/[0-9A-F]{1,8}$")

_reads_replica: ContextVar[bool] = ContextVar("reads_replica", default=False)


def replica_configured() -> bool:
    return REPLICA in connections


def reading_connection(model: type[Model]) -> BaseDatabaseWrapper:
    """The connection an ORM read of `model` would use now (the replica while this request may read it, else the
    primary), for raw SQL that reads; never for a write. A streamed response picks it in the view: its rows are read
    after the middleware has returned, when every read goes to the primary."""
    return connections[router.db_for_read(model)]


def _reads_access(model: Any) -> bool:
    """A read of who a request is or what they may see (the database cache's model has a partial `_meta`)."""
    meta = model._meta
    if meta.app_label in ACCESS_APPS:
        return True
    owner = meta.auto_created or model  # a many-to-many table (a user's groups) goes with its model
    return owner._meta.label_lower in ACCESS_MODELS


class ReplicaRouter:
    """Routes ORM reads to the replica while the current request may read it; everything else to the primary."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        if _reads_access(model):
            return DEFAULT_DB_ALIAS
        if _reads_replica.get() and not connections[DEFAULT_DB_ALIAS].in_atomic_block:
            return REPLICA
        return DEFAULT_DB_ALIAS

    def db_for_write(self, model: Any, **hints: Any) -> str:
        if model._meta.app_label != CACHE_APP_LABEL:  # a cache entry written changes nothing the request reads
            _reads_replica.set(False)  # what this request reads next may depend on what it just wrote
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # the replica holds the primary's rows: one database as far as relations go

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS


def _replica_has(lsn: str | None) -> bool:
    """The replica answers and has replayed the WAL up to `lsn` (any position when None)."""
    if lsn is not None and not (isinstance(lsn, str) and _LSN.match(lsn)):
        return False  # a cookie we did not write: the primary is always right
    try:
        with connections[REPLICA].cursor() as cursor:
            cursor.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [lsn or "0/0"])
            row = cursor.fetchone()
    except DatabaseError:
        connections[REPLICA].close()
        return False
    return bool(row and row[0])


def _primary_lsn() -> str:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()::text")
        return cursor.fetchone()[0]


def _lsn_text(position: int) -> str:
    """A WAL position in bytes as PostgreSQL writes a pg_lsn (high and low 32 bits in hexadecimal)."""
    return f"{position >> 32:X}/{position & 0xFFFFFFFF:X}"


def _marks_table() -> str:
    return str(apps.get_model("api", "WriteMark")._meta.db_table)


def user_mark(user_id: int) -> str | None:
    """The primary's position after the user's last write while its mark lasts, else None."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(f"SELECT lsn FROM {_marks_table()} WHERE user_id = %s AND until > %s", [user_id, timezone.now()])  # noqa: S608
        row = cursor.fetchone()
    return _lsn_text(row[0]) if row else None


def user_mark_write(user_id: int) -> str:
    """Marks the primary's position now (after the user's write) for the user's reads; the mark it keeps, which
    is never behind one kept before: two writes answered out of order leave the later position."""
    table = _marks_table()
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (user_id, lsn, until) "  # noqa: S608
            f"VALUES (%s, (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint, %s) "
            f"ON CONFLICT (user_id) DO UPDATE SET lsn = GREATEST({table}.lsn, excluded.lsn), until = excluded.until "
            f"RETURNING lsn",
            [user_id, timezone.now() + timedelta(seconds=MARK_TTL_S)],
        )
        return _lsn_text(cursor.fetchone()[0])


def user_marks_purge() -> int:
    """Delete the marks past their time; how many."""
    deleted, _ = apps.get_model("api", "WriteMark").objects.filter(until__lte=timezone.now()).delete()
    return deleted


def token_authenticated(request: HttpRequest, *, user_id: int, marks_writes: bool) -> None:
    """Called by API token authentication once the token is found valid (on the primary): a read goes on to read
    the replica if it has replayed the user's last write; a write by a token that `marks_writes` leaves the
    primary's position after it for the user's next reads (ReplicaReadMiddleware keeps it)."""
    if not replica_configured():
        return
    if request.method in SAFE_METHODS:
        _reads_replica.set(_replica_has(user_mark(user_id)))
    elif marks_writes:
        request.gg_marks_user = user_id  # type: ignore[attr-defined]


def _bearer(request: HttpRequest) -> bool:
    return request.headers.get("Authorization", "").lower().startswith(("bearer ", "token "))


class ReplicaReadMiddleware:
    """Lets a page read the replica (see the module's docstring); no-op without DATABASE_REPLICA_URL."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not replica_configured():
            return self.get_response(request)
        safe = request.method in SAFE_METHODS
        # A request with an API token reads the primary until its authentication has found the token there.
        token = _reads_replica.set(safe and not _bearer(request) and _replica_has(request.COOKIES.get(COOKIE)))
        try:
            response = self.get_response(request)
        finally:
            _reads_replica.reset(token)
        if safe:
            return response
        # Only a browser's writes (it has a session, or is given one by signing in) need the cookie, and only a
        # token that reads (not a collector's) the user's mark: a collector's POST costs no extra round trip.
        session = settings.SESSION_COOKIE_NAME
        browser = session in request.COOKIES or session in response.cookies
        user_id = getattr(request, "gg_marks_user", None)
        if browser and user_id is None and not _bearer(request):
            user = getattr(request, "user", None)  # signed in by its session (a sign-out leaves the cookie only)
            user_id = user.pk if user is not None and user.is_authenticated else None
        if browser or user_id is not None:
            lsn = _primary_lsn() if user_id is None else user_mark_write(user_id)
            if browser:
                response.set_cookie(COOKIE, lsn, max_age=COOKIE_MAX_AGE_S, httponly=True, samesite="Lax")
        return response


class ReplicaUserMarkMiddleware:
    """After authentication: a signed-in browser user whose last write (in this browser or any other) the replica
    has not replayed yet reads the primary, though this browser's cookie is older or absent. One primary read of a
    row a page; the replica is asked again only when the user's mark is not the cookie's."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if _reads_replica.get() and not _bearer(request):  # only set with a replica, for a read it may serve
            user = getattr(request, "user", None)
            if user is not None and user.is_authenticated:
                mark = user_mark(user.pk)
                if mark is not None and mark != request.COOKIES.get(COOKIE) and not _replica_has(mark):
                    _reads_replica.set(False)
        return self.get_response(request)
