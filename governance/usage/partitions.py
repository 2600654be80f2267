"""Sample partitions (PostgreSQL): create ahead, fold in stragglers, drop by age.

The table is `PARTITION BY RANGE (ts)` with one partition per UTC month (`usage_sample_y2026m11`), or per UTC day
when SAMPLE_PARTITION=day (`usage_sample_y2026m11d05`), and a DEFAULT partition, so a sample is never refused for
want of a partition. Rows that land in DEFAULT (a span nobody created yet, or late data older than retention) are
moved into their own span's partition by `partitions_ensure`, or deleted by `partitions_drop_expired` once older
than retention: they are folded into the hourly rollups at ingest either way, and rollups are kept forever.

Switching from months to days keeps the monthly partitions already made (they are dropped whole when their last
day is past retention); days are created only where no month covers them.

On SQLite the table is plain; retention deletes rows instead of dropping partitions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from governance.lib.months import Month

TABLE = "usage_sample"
DEFAULT = "usage_sample_default"
_NAME = re.compile(r"^usage_sample_y(?P<year>\d{4})m(?P<month>\d{2})(?:d(?P<day>\d{2}))?$")
MONTH, DAY = "month", "day"


@dataclass(frozen=True, order=True)
class Span:
    """The time range [start, end) of one partition: a UTC month or a UTC day."""

    start: datetime
    end: datetime

    @property
    def is_day(self) -> bool:
        return self.end - self.start == timedelta(days=1)

    @property
    def name(self) -> str:
        s = self.start
        return f"{TABLE}_y{s.year:04d}m{s.month:02d}" + (f"d{s.day:02d}" if self.is_day else "")

    def __str__(self) -> str:
        return self.start.strftime("%Y-%m-%d" if self.is_day else "%Y-%m")


def month_span(month: Month) -> Span:
    return Span(month.start, month.end)


def span_of(moment: datetime, unit: str | None = None) -> Span:
    """The partition span holding `moment` in `unit` (month or day; default SAMPLE_PARTITION)."""
    if (unit or settings.SAMPLE_PARTITION) == DAY:
        start = datetime(moment.year, moment.month, moment.day, tzinfo=UTC)
        return Span(start, start + timedelta(days=1))
    return month_span(Month.of(moment))


@dataclass
class PartitionReport:
    created: list[str] = field(default_factory=list)
    moved_rows: int = 0
    dropped: list[str] = field(default_factory=list)
    deleted_rows: int = 0


def partition_name(month: Month) -> str:
    return month_span(month).name


def is_partitioned() -> bool:
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_partitioned_table WHERE partrelid = %s::regclass", [TABLE])
        return cursor.fetchone() is not None


def _span_named(name: str) -> Span | None:
    m = _NAME.match(name)
    if m is None:
        return None
    year, month = int(m["year"]), int(m["month"])
    if m["day"] is None:
        return month_span(Month(year, month))
    return span_of(datetime(year, month, int(m["day"]), tzinfo=UTC), DAY)


def partitions_list() -> list[Span]:
    """The spans (months, days) that have their own partition, oldest first."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = %s::regclass",
            [TABLE],
        )
        names = [row[0] for row in cursor.fetchall()]
    return sorted(span for n in names if (span := _span_named(n)) is not None)


def _spans_in_default(unit: str) -> list[Span]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT DISTINCT date_trunc(%s, ts AT TIME ZONE 'UTC') FROM {DEFAULT}", [unit])
        return sorted(span_of(row[0].replace(tzinfo=UTC), unit) for row in cursor.fetchall())


def _partition_create(span: Span) -> int:
    """Create one span's partition, first moving its rows out of DEFAULT (attach refuses otherwise)."""
    name = span.name
    with transaction.atomic(), connection.cursor() as cursor:
        # Locks the parent so no insert slips a row for this span into DEFAULT meanwhile.
        cursor.execute(f"LOCK TABLE {TABLE} IN SHARE ROW EXCLUSIVE MODE")
        cursor.execute(f"CREATE TABLE {name} (LIKE {TABLE} INCLUDING DEFAULTS)")
        cursor.execute(
            f"WITH moved AS (DELETE FROM {DEFAULT} WHERE ts >= %s AND ts < %s RETURNING *) "
            f"INSERT INTO {name} SELECT * FROM moved",
            [span.start, span.end],
        )
        moved = cursor.rowcount
        cursor.execute(
            f"ALTER TABLE {TABLE} ATTACH PARTITION {name} FOR VALUES FROM (%s) TO (%s)", [span.start, span.end]
        )
    return moved


def retention_cutoff(now: datetime) -> datetime | None:
    """Samples before this moment may go; None when retention is off (SAMPLE_RETENTION_DAYS=0)."""
    days = settings.SAMPLE_RETENTION_DAYS
    return now - timedelta(days=days) if days > 0 else None


def partitions_ensure(*, now: datetime | None = None, ahead: int | None = None) -> PartitionReport:
    """Create the partitions of this span (month or day, SAMPLE_PARTITION) and `ahead` spans after it, and of every
    span found in DEFAULT; a day that a monthly partition already covers gets none.

    Idempotent: run it as often as you like (beat runs it every few hours, the migration once).
    """
    report = PartitionReport()
    if not is_partitioned():
        return report
    unit = settings.SAMPLE_PARTITION
    now = now or timezone.now()
    ahead = settings.SAMPLE_PARTITIONS_AHEAD if ahead is None else ahead
    cutoff = retention_cutoff(now)
    wanted = [span_of(now, unit)]
    for _ in range(ahead):
        wanted.append(span_of(wanted[-1].end, unit))
    # Stragglers inside retention get their span back; older ones wait in DEFAULT for deletion.
    wanted += [s for s in _spans_in_default(unit) if cutoff is None or s.end > cutoff]
    existing = partitions_list()
    for span in sorted(set(wanted)):
        if any(e.start < span.end and span.start < e.end for e in existing):
            continue
        report.moved_rows += _partition_create(span)
        report.created.append(span.name)
        existing.append(span)
    return report


def partitions_drop_expired(*, now: datetime | None = None) -> PartitionReport:
    """Drop whole partitions (months, or days with SAMPLE_PARTITION=day) of samples older than SAMPLE_RETENTION_DAYS;
    rollups are never touched."""
    report = PartitionReport()
    cutoff = retention_cutoff(now or timezone.now())
    if cutoff is None:
        return report
    # Only whole spans go: a span is kept until its last sample is past retention.
    boundary = span_of(cutoff).start
    if not is_partitioned():
        from governance.usage.models import Sample

        report.deleted_rows = Sample.objects.filter(ts__lt=boundary).delete()[0]
        return report
    with connection.cursor() as cursor:
        for span in partitions_list():
            if span.end <= boundary:
                cursor.execute(f"DROP TABLE {span.name}")
                report.dropped.append(span.name)
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
