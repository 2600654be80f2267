"""Writing the ledger's rows fast: a binary COPY on PostgreSQL, bulk inserts elsewhere."""

from __future__ import annotations

from datetime import date, datetime

from django.db import connection

from governance.costs.models import Charge

WRITE_BATCH = 2000


DELETE_JOB_DAYS = """
DELETE FROM costs_charge WHERE kind = 'usage'
AND (job_id, day) IN (SELECT * FROM unnest(%s::int8[], %s::date[]))
"""


def usage_replace(job_days: dict[int, set[date]], rows: list[dict], now: datetime) -> None:
    pairs = [(pk, d) for pk, days in job_days.items() for d in days]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(DELETE_JOB_DAYS, [[p for p, _ in pairs], [d for _, d in pairs]])
    else:
        for pk, days in job_days.items():
            Charge.objects.filter(kind=Charge.Kind.USAGE, job_id=pk, day__in=days).delete()
    rows_insert(rows, now)


# The ledger's columns as pricing writes them, and their types for a binary COPY (PostgreSQL): building an ORM
# object and an INSERT parameter per value cost most of what pricing a day costs.
COPY_COLUMNS = (
    ("kind", "text"), ("month", "date"), ("day", "date"), ("period_start", "timestamptz"),
    ("period_end", "timestamptz"), ("cluster_id", "int8"), ("cluster_name", "text"), ("job_id", "int8"),
    ("job_ref", "text"), ("user_name", "text"), ("team_id", "int8"), ("team_name", "text"), ("project_id", "int8"),
    ("project_name", "text"), ("gpu_model", "text"), ("mig_profile", "text"), ("gpu_hours", "numeric"),
    ("used_gpu_hours", "numeric"), ("idle_gpu_hours", "numeric"), ("cost", "numeric"), ("idle_cost", "numeric"),
    ("energy_kwh", "numeric"), ("energy_cost", "numeric"), ("carbon_kg", "numeric"), ("currency", "text"),
    ("at_default_rate", "bool"), ("billed", "bool"), ("list_cost", "numeric"), ("contracted_cost", "numeric"),
    ("billed_cost", "numeric"), ("commitment_gpu_hours", "numeric"), ("commitment_id", "int8"),
    ("gpu_share", "numeric"),
)  # fmt: skip
COPY_INTO = "COPY costs_charge ({}, corrected_kind, reason, priced_at) FROM STDIN (FORMAT BINARY)".format(
    ", ".join(name for name, _ in COPY_COLUMNS)
)


def rows_insert(rows: list[dict], now: datetime) -> None:
    if not rows:
        return
    if connection.vendor == "postgresql":
        names = [name for name, _ in COPY_COLUMNS]
        with connection.cursor() as cursor, cursor.cursor.copy(COPY_INTO) as copy:
            copy.set_types([kind for _, kind in COPY_COLUMNS] + ["text", "text", "timestamptz"])
            for row in rows:
                copy.write_row([row.get(name) for name in names] + ["", "", now])
        return
    for i in range(0, len(rows), WRITE_BATCH):
        Charge.objects.bulk_create([Charge(priced_at=now, **row) for row in rows[i : i + WRITE_BATCH]])
