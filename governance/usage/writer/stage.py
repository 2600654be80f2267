"""Stage a batch's samples in per-transaction temporary tables, for the set-based statements that follow."""

from __future__ import annotations

from django.db import connection

from governance.usage import prepared
from governance.usage.writer.sql import HOUR_COLUMNS, HOUR_STAGE, HOUR_TYPES, SAMPLE_COLUMNS, STAGE


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
            typed = ", ".join(f"{c} {t}" for c, t in zip(prepared.STAGE_COLUMNS, prepared.STAGE_TYPES, strict=True))
            hours = ", ".join(f"{c} {t}" for c, t in zip(HOUR_COLUMNS, HOUR_TYPES, strict=True))
            # One round trip. Each commit empties both tables; the DELETEs are for two batches sharing one
            # transaction (an import), and on the usual empty tables cost nothing, where a TRUNCATE would
            # give each table new files for every batch.
            cursor.execute(
                f"CREATE TEMP TABLE IF NOT EXISTS {STAGE} ({typed}) ON COMMIT DELETE ROWS;"
                f" CREATE TEMP TABLE IF NOT EXISTS {HOUR_STAGE} ({hours}) ON COMMIT DELETE ROWS;"
                f" DELETE FROM {STAGE}; DELETE FROM {HOUR_STAGE}"
            )
            cols = ", ".join(prepared.STAGE_COLUMNS[: 3 + readings])
            with cursor.cursor.copy(f"COPY {STAGE} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
                if isinstance(rows, memoryview):
                    copy.write(rows)
                else:
                    copy.set_types(prepared.STAGE_TYPES)
                    for row in rows:
                        copy.write_row(row)
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
