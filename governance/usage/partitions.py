"""Monthly partitions of the raw sample table (PostgreSQL): create ahead, fold in stragglers, drop by age.

The table is `PARTITION BY RANGE (ts)` with one partition per UTC month (`usage_sample_y2026m11`) and a
DEFAULT partition, so a sample is never refused for want of a partition. Rows that land in DEFAULT
(a month nobody created yet, or late data older than retention) are moved into their own month's
partition by `partitions_ensure`, or deleted by `partitions_drop_expired` once older than retention:
they are folded into the hourly rollups at ingest either way, and rollups are kept forever.

On SQLite the table is plain; retention deletes rows instead of dropping partitions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from governance.lib.months import Month

TABLE = "usage_sample"
DEFAULT = "usage_sample_default"
_NAME = re.compile(r"^usage_sample_y(?P<year>\d{4})m(?P<month>\d{2})$")


@dataclass
class PartitionReport:
    created: list[str] = field(default_factory=list)
    moved_rows: int = 0
    dropped: list[str] = field(default_factory=list)
    deleted_rows: int = 0


def partition_name(month: Month) -> str:
    return f"{TABLE}_y{month.year:04d}m{month.month:02d}"


def is_partitioned() -> bool:
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_partitioned_table WHERE partrelid = %s::regclass", [TABLE])
        return cursor.fetchone() is not None


def partitions_list() -> list[Month]:
    """The months that have their own partition, oldest first."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = %s::regclass",
            [TABLE],
        )
        names = [row[0] for row in cursor.fetchall()]
    months = [Month(int(m["year"]), int(m["month"])) for n in names if (m := _NAME.match(n))]
    return sorted(months)


def _months_in_default() -> list[Month]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT DISTINCT date_trunc('month', ts AT TIME ZONE 'UTC') FROM {DEFAULT}")
        return sorted(Month(row[0].year, row[0].month) for row in cursor.fetchall())


def _partition_create(month: Month) -> int:
    """Create one month's partition, first moving its rows out of DEFAULT (attach refuses otherwise)."""
    name = partition_name(month)
    with transaction.atomic(), connection.cursor() as cursor:
        # Locks the parent so no insert slips a row for this month into DEFAULT meanwhile.
        cursor.execute(f"LOCK TABLE {TABLE} IN SHARE ROW EXCLUSIVE MODE")
        cursor.execute(f"CREATE TABLE {name} (LIKE {TABLE} INCLUDING DEFAULTS)")
        cursor.execute(
            f"WITH moved AS (DELETE FROM {DEFAULT} WHERE ts >= %s AND ts < %s RETURNING *) "
            f"INSERT INTO {name} SELECT * FROM moved",
            [month.start, month.end],
        )
        moved = cursor.rowcount
        cursor.execute(
            f"ALTER TABLE {TABLE} ATTACH PARTITION {name} FOR VALUES FROM (%s) TO (%s)", [month.start, month.end]
        )
    return moved


def retention_cutoff(now: datetime) -> datetime | None:
    """Samples before this moment may go; None when retention is off (SAMPLE_RETENTION_DAYS=0)."""
    days = settings.SAMPLE_RETENTION_DAYS
    return now - timedelta(days=days) if days > 0 else None


def partitions_ensure(*, now: datetime | None = None, ahead: int | None = None) -> PartitionReport:
    """Create the partitions of this month and `ahead` months after it, and of every month found in DEFAULT.

    Idempotent: run it as often as you like (beat runs it daily, the migration once).
    """
    report = PartitionReport()
    if not is_partitioned():
        return report
    now = now or timezone.now()
    ahead = settings.SAMPLE_PARTITIONS_AHEAD if ahead is None else ahead
    cutoff = retention_cutoff(now)
    wanted = [Month.of(now)]
    for _ in range(ahead):
        wanted.append(wanted[-1].next())
    # Stragglers inside retention get their month back; older ones wait in DEFAULT for deletion.
    wanted += [m for m in _months_in_default() if cutoff is None or m.end > cutoff]
    existing = set(partitions_list())
    for month in sorted(set(wanted) - existing):
        report.moved_rows += _partition_create(month)
        report.created.append(partition_name(month))
    return report


def partitions_drop_expired(*, now: datetime | None = None) -> PartitionReport:
    """Drop whole months of samples older than SAMPLE_RETENTION_DAYS; rollups are never touched."""
    report = PartitionReport()
    cutoff = retention_cutoff(now or timezone.now())
    if cutoff is None:
        return report
    # Only whole months go: a month is kept until its last sample is past retention.
    boundary = Month.of(cutoff).start
    if not is_partitioned():
        from governance.usage.models import Sample

        report.deleted_rows = Sample.objects.filter(ts__lt=boundary).delete()[0]
        return report
    with connection.cursor() as cursor:
        for month in partitions_list():
            if month.end <= boundary:
                cursor.execute(f"DROP TABLE {partition_name(month)}")
                report.dropped.append(partition_name(month))
        cursor.execute(f"DELETE FROM {DEFAULT} WHERE ts < %s", [boundary])
        report.deleted_rows = cursor.rowcount
    return report


def partitions_maintain(*, now: datetime | None = None) -> PartitionReport:
    """The periodic job: create ahead, fold stragglers in, then apply retention."""
    ensured = partitions_ensure(now=now)
    expired = partitions_drop_expired(now=now)
    return PartitionReport(
        created=ensured.created,
        moved_rows=ensured.moved_rows,
        dropped=expired.dropped,
        deleted_rows=expired.deleted_rows,
    )
