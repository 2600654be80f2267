"""No test leaves rows behind in the test database: each one is checked once its teardown is over.

A test's own writes are rolled back (or flushed, for a transactional test). What another connection commits while
a plain test runs (a subprocess, a server thread) is neither: it stays for every later test of the same worker,
which then finds rows it did not write (a rate count left by a subprocess made an unrelated test fail in CI, on
whichever worker happened to run both). So after each test the tables are looked at, in one statement, and rows in
any of them fail that test's teardown, naming the tables, and are removed, so that the next test starts clean.
"""

from __future__ import annotations

from django.core.management.color import no_style
from django.db import connection

# What the migrations themselves write: there before any test.
SEEDED = frozenset({"django_migrations", "django_content_type", "auth_permission"})


class RowsLeftBehind(AssertionError):
    pass


_tables_of: dict[str, list[str]] = {}


def _tables() -> list[str]:
    """The tables to look at: the models' and the rest (the database cache's), partitions through their parent."""
    name = connection.settings_dict["NAME"]
    if name not in _tables_of:
        _tables_of[name] = _tables_now()
    return _tables_of[name]


def _tables_now() -> list[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND NOT EXISTS "
                "(SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE c.relname = tablename)"
            )
            names = [row[0] for row in cursor.fetchall()]
        else:
            names = connection.introspection.table_names(cursor)
    return sorted(name for name in names if name not in SEEDED)


def tables_with_rows() -> list[str]:
    """The tables (apart from SEEDED) that hold a committed row now."""
    tables = _tables()
    if not tables:
        return []
    quote = connection.ops.quote_name
    query = " UNION ALL ".join(f"SELECT '{t}' WHERE EXISTS (SELECT 1 FROM {quote(t)})" for t in tables)
    with connection.cursor() as cursor:
        cursor.execute(query)
        return [row[0] for row in cursor.fetchall()]


def check_left_behind() -> None:
    """Raise RowsLeftBehind, naming the tables, when a test left rows; empty them first."""
    left = tables_with_rows()
    if not left:
        return
    with connection.cursor() as cursor:
        for statement in connection.ops.sql_flush(no_style(), left, reset_sequences=False, allow_cascade=True):
            cursor.execute(statement)
    raise RowsLeftBehind(
        f"rows left committed in the test database once the test was over: {', '.join(left)}. A test whose "
        "rows are written by another connection (a subprocess, a server thread) must be transactional "
        "(django_db(transaction=True)), so that the flush after it removes them."
    )
