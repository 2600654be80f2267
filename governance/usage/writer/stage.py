"""Stage a batch's samples in per-transaction temporary tables, for the set-based statements that follow."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from governance.usage import prepared
from governance.usage.writer.sql import GROUP_STAGE, HOUR_COLUMNS, HOUR_STAGE, HOUR_TYPES, SAMPLE_COLUMNS, STAGE

# The setting a group's staging table takes each row's `part` from: set before each batch's COPY.
GROUP_PART_SETTING = "gg.stage_part"


def _tables_ready(cursor, stage: str, extra: str = "") -> None:
    """Both per-transaction staging tables exist and are empty (one round trip). Each commit empties them; the
    DELETEs are for two writes sharing one transaction (an import), and on the usual empty tables cost nothing,
    where a TRUNCATE would give each table new files for every batch."""
    typed = ", ".join(f"{c} {t}" for c, t in zip(prepared.STAGE_COLUMNS, prepared.STAGE_TYPES, strict=True))
    hours = ", ".join(f"{c} {t}" for c, t in zip(HOUR_COLUMNS, HOUR_TYPES, strict=True))
    cursor.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {stage} ({typed}{extra}) ON COMMIT DELETE ROWS;"
        f" CREATE TEMP TABLE IF NOT EXISTS {HOUR_STAGE} ({hours}) ON COMMIT DELETE ROWS;"
        f" DELETE FROM {stage}; DELETE FROM {HOUR_STAGE}"
    )


def _rows_copied(cursor, stage: str, rows: list[tuple] | memoryview, readings: int) -> None:
    cols = ", ".join(prepared.STAGE_COLUMNS[: 3 + readings])
    with cursor.cursor.copy(f"COPY {stage} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
        if isinstance(rows, memoryview):
            copy.write(rows)
        else:  # rows prepare() made in this process: every column
            copy.set_types(prepared.STAGE_TYPES)
            for row in rows:
                copy.write_row(row)


def samples_stage(
    rows: list[tuple] | memoryview, gpu_ids: list[int], job_ids: list[int], readings: int = len(prepared.READINGS)
) -> None:
    """Fill the per-transaction staging table.

    PostgreSQL: the rows name GPUs and jobs by header position and, when they come from the inbox, are
    already in binary COPY format: they are streamed in as they are (an earlier release's rows, with their first
    `readings` columns; the rest stay null), and the statements below map positions to ids in SQL. SQLite: rows
    are inserted with their ids.
    """
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            _tables_ready(cursor, STAGE)
            _rows_copied(cursor, STAGE, rows, readings)
            return
        cols = ", ".join(SAMPLE_COLUMNS)
        cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {STAGE} ({cols})")
        cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {HOUR_STAGE} ({', '.join(HOUR_COLUMNS)})")
        cursor.execute(f"DELETE FROM {STAGE}")
        cursor.execute(f"DELETE FROM {HOUR_STAGE}")
        assert not isinstance(rows, memoryview)  # binary COPY rows are PostgreSQL's; SQLite's inbox holds JSON
        marks = ", ".join(["%s"] * len(SAMPLE_COLUMNS))
        adapt = connection.ops.adapt_datetimefield_value
        cursor.executemany(
            f"INSERT INTO {STAGE} ({cols}) VALUES ({marks})",
            [(adapt(r[0]), *r[1:]) for r in prepared.rows_with_ids(rows, gpu_ids, job_ids)],
        )


def samples_stage_group(parts: Sequence[tuple[list[tuple] | memoryview, int]]) -> None:
    """Fill the group's staging table (PostgreSQL) with the rows of several batches, each `(rows, readings)` as
    `samples_stage` takes them: each batch's rows are streamed in as they are, and a row's `part` (its batch's
    place in `parts`, from 1) comes from the column's default, a setting changed before each batch's COPY, so no
    row is rewritten on the way."""
    with connection.cursor() as cursor:
        part = f", part int4 NOT NULL DEFAULT current_setting('{GROUP_PART_SETTING}')::int4"
        _tables_ready(cursor, GROUP_STAGE, part)
        for number, (rows, readings) in enumerate(parts, 1):
            cursor.execute("SELECT set_config(%s, %s, true)", [GROUP_PART_SETTING, str(number)])
            _rows_copied(cursor, GROUP_STAGE, rows, readings)
