"""No test leaves rows behind in the test database: each one is checked once its teardown is over.

A test's own writes are rolled back (or flushed, for a transactional test). What another connection commits while
a plain test runs (a subprocess, a server thread) is neither: it stays for every later test of the same worker,
which then finds rows it did not write (a rate count left by a subprocess made an unrelated test fail in CI, on
whichever worker happened to run both). So after each test the tables are looked at, in one statement, and rows in
any of them fail that test's teardown, naming the tables, and are removed, so that the next test starts clean.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.management.color import no_style
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper

# What the migrations themselves write: there before any test.
SEEDED = frozenset({"django_migrations", "django_content_type", "auth_permission"})


class RowsLeftBehind(AssertionError):
    pass


_tables_of: dict[str, list[str]] = {}


@contextmanager
def _checking() -> Iterator[BaseDatabaseWrapper]:
    """On PostgreSQL a connection of the check's own, closed after it: it sees what is committed, whatever the test's
    connection holds, and leaves nothing open (while an event loop runs in the thread, as Playwright's does, asgiref
    keeps Django's connections per context, and one opened there by the check outlived the test database). On
    SQLite the test's own connection: only it sees the in-memory database."""
    if connection.vendor != "postgresql":
        yield connections[DEFAULT_DB_ALIAS]
        return
    own = connection.copy()
    try:
        yield own
    finally:
        own.close()


def _tables(db: BaseDatabaseWrapper) -> list[str]:
    """The tables to look at: the models' and the rest (the database cache's), partitions through their parent."""
    name = db.settings_dict["NAME"]
    if name not in _tables_of:
        with db.cursor() as cursor:
            if db.vendor == "postgresql":
                cursor.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND NOT EXISTS "
                    "(SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE c.relname = tablename)"
                )
                names = [row[0] for row in cursor.fetchall()]
            else:
                names = db.introspection.table_names(cursor)
        _tables_of[name] = sorted(name for name in names if name not in SEEDED)
    return _tables_of[name]


def _with_rows(db: BaseDatabaseWrapper) -> list[str]:
    tables = _tables(db)
    if not tables:
        return []
    quote = db.ops.quote_name
    query = " UNION ALL ".join(f"SELECT '{t}' WHERE EXISTS (SELECT 1 FROM {quote(t)})" for t in tables)
    with db.cursor() as cursor:
        cursor.execute(query)
        return [row[0] for row in cursor.fetchall()]


def tables_with_rows() -> list[str]:
    """The tables (apart from SEEDED) that hold a committed row now."""
    with _checking() as db:
        return _with_rows(db)


def check_left_behind() -> None:
    """Raise RowsLeftBehind, naming the tables, when a test left rows; empty them first."""
    with _checking() as db:
        left = _with_rows(db)
        if not left:
            return
        with db.cursor() as cursor:
            for statement in db.ops.sql_flush(no_style(), left, reset_sequences=False, allow_cascade=True):
                cursor.execute(statement)
    raise RowsLeftBehind(
        f"rows left committed in the test database once the test was over: {', '.join(left)}. A test whose "
        "rows are written by another connection (a subprocess, a server thread) must be transactional "
        "(django_db(transaction=True)), so that the flush after it removes them."
    )
