"""PostgreSQL's plans in tests: a statement's plan, and a table's statistics forgotten, so that a test can hold a
statement to the plan it must keep when PostgreSQL knows nothing of a table (before any ANALYZE)."""

import pytest
from django.db import connection


def plan(sql: str, params: object) -> str:
    """The plan PostgreSQL would run the statement with (EXPLAIN, not run)."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def statistics_forgotten(table: str) -> None:
    """The table as PostgreSQL sees it before any ANALYZE, in the test's transaction (rolled back with it); the test
    is skipped where the database user may not do that (a superuser's)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        if not cursor.fetchone()[0]:
            pytest.skip("forgetting a table's statistics takes a superuser")
        cursor.execute("DELETE FROM pg_statistic WHERE starelid = %s::regclass", [table])
        cursor.execute("UPDATE pg_class SET reltuples = -1 WHERE oid = %s::regclass", [table])
