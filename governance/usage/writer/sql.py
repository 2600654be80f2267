"""What the writer's stages share: the staging tables' columns, the per-database pieces of its statements,
looking up and creating rows by natural key, and running several statements in one round trip."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connection

from governance.usage import prepared

# usage_sample's columns as the writer fills them, and their types for a binary COPY.
SAMPLE_COLUMNS = ("ts", "gpu_id", "job_id", *prepared.READING_COLUMNS)
SAMPLE_TYPES = ("timestamptz", "int8", "int8", *prepared.READING_TYPES)
STAGE = "usage_sample_stage"
# Several batches written in one transaction share a staging table whose rows say which batch they came from
# (`part`, 1-based; see samples_stage_group).
GROUP_STAGE = "usage_sample_group_stage"

# The batch's samples are aggregated once per (job, GPU, hour), unallocated samples under a NULL job; both
# rollups are then folded from that handful of rows rather than from the samples again. A null SM counts in
# `samples` (the GPU was there) but not in `sm_samples`, the SM mean's divisor, nor as idle: unknown, not 0.
HOUR_STAGE = "usage_hour_stage"
# Each column of that aggregate, its type, and how a rollup row takes in a later batch's value.
HOURS = (
    ("job_id", "int8", None), ("gpu_id", "int8", None), ("hour", "timestamptz", None), ("samples", "int4", "sum"),
    ("sm_samples", "int4", "sum"), ("idle_samples", "int4", "sum"), ("sm_sum", "float8", "sum"),
    ("sm_max", "float8", "max"), ("sm_sq_sum", "float8", "sum"), ("mem_used_max", "float8", "max"),
    ("mem_total_mib", "float8", "max"), ("power_sum", "float8", "sum"), ("power_samples", "int4", "sum"),
    ("numa_mismatch_samples", "int4", "sum"), ("io_wait_sum", "float8", "sum"), ("io_wait_samples", "int4", "sum"),
    ("host_cpu_sum", "float8", "sum"), ("host_cpu_samples", "int4", "sum"), ("tensor_sum", "float8", "sum"),
    ("tensor_samples", "int4", "sum"), ("dram_sum", "float8", "sum"), ("dram_samples", "int4", "sum"),
    ("nvlink_sum", "float8", "sum"), ("nvlink_samples", "int4", "sum"), ("pcie_sum", "float8", "sum"),
    ("pcie_samples", "int4", "sum"), ("job_sm_sum", "float8", "sum"), ("job_sm_samples", "int4", "sum"),
)  # fmt: skip
HOUR_COLUMNS = tuple(name for name, _, _ in HOURS)
HOUR_TYPES = tuple(kind for _, kind, _ in HOURS)


def for_vendor(template: str) -> str:
    """The statement for this database: {gpu} and {job} are a staged row's ids, {gpu_key} and {job_key}
    what to group by (PostgreSQL: header positions, looked up in the batch's id arrays)."""
    return template.format(stage=STAGE, **(POSTGRES_TERMS if connection.vendor == "postgresql" else SQLITE_TERMS))


POSTGRES_TERMS = {
    "hour": "date_trunc('hour', ts)",
    "stage_day": "(s.hour AT TIME ZONE 'UTC')::date",  # the UTC day of an hour-stage row `s`
    "greatest": "GREATEST",
    # A GPU on a node past the mask's 63 bits tests the sign bit, which no job's CPU node sets.
    "mismatch": "(cpu_numa_mask & (1::int8 << least(gpu_numa_node, 63))) = 0",
    "gpu": "(%(gpu_ids)s::int8[])[gpu_ix]",
    "job": "(%(job_ids)s::int8[])[job_ix]",
    "gpu_key": "gpu_ix",
    "job_key": "job_ix",
}
# The same for a group's staging table: a row's header positions are its batch's, so its ids are found past the
# offset of its batch (`part`) in the group's id arrays; rows of different batches naming one GPU or job group
# together by that id. A job position of 0 or NULL (no job) stays no job.
_GROUP_GPU = "(%(gpu_ids)s::int8[])[gpu_ix + (%(gpu_offsets)s::int4[])[part]]"
_GROUP_JOB = "(%(job_ids)s::int8[])[nullif(job_ix, 0) + (%(job_offsets)s::int4[])[part]]"
POSTGRES_GROUP_TERMS = {**POSTGRES_TERMS, "gpu": _GROUP_GPU, "job": _GROUP_JOB, "gpu_key": _GROUP_GPU,
                        "job_key": _GROUP_JOB}  # fmt: skip
SQLITE_TERMS = {
    "hour": "strftime('%%Y-%%m-%%d %%H:00:00', ts)",
    "stage_day": "date(s.hour)",
    "greatest": "max",
    "mismatch": "(cpu_numa_mask & (1 << min(gpu_numa_node, 63))) = 0",
    "gpu": "gpu_id",
    "job": "job_id",
    "gpu_key": "gpu_id",
    "job_key": "job_id",
}


def execute_in_turn(statements: Sequence[str], params: Mapping[str, Any] | None = None) -> None:
    """Run `statements` in order with the same named parameters: on PostgreSQL in one round trip (a
    client-side-bound execute takes several statements), on SQLite, which takes one, one by one."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(";\n".join(statements), params)
            return
        for sql in statements:
            cursor.execute(sql, params)


# Looks up rows by (cluster, natural key) in one fixed statement on PostgreSQL.
KNOWN_IDS = """
SELECT t.id, t.cluster_id, t.{field} FROM {table} t
JOIN unnest(%s::int8[], %s::text[]) AS k (cluster_id, value) ON t.cluster_id = k.cluster_id AND t.{field} = k.value
"""


def known_ids(model, field: str, keys: set[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """(cluster id, `field`) -> id of the rows of `model` among `keys` that exist."""
    if connection.vendor == "postgresql":
        ordered = sorted(keys)
        with connection.cursor() as cursor:
            cursor.execute(
                KNOWN_IDS.format(table=model._meta.db_table, field=field),
                [[c for c, _ in ordered], [v for _, v in ordered]],
            )
            return {(c, v): pk for pk, c, v in cursor.fetchall()}
    rows = model.objects.filter(cluster_id__in={c for c, _ in keys}, **{f"{field}__in": {v for _, v in keys}})
    return {(c, v): pk for pk, c, v in rows.order_by().values_list("id", "cluster_id", field) if (c, v) in keys}


def ids_ensure(model, field: str, keys: set[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """(cluster id, `field`) -> id, creating the rows not known yet (no lock on known ones)."""
    ids = known_ids(model, field, keys)
    if len(ids) < len(keys):  # sorted: two workers creating the same rows wait rather than deadlock
        missing = sorted(keys - ids.keys())
        model.objects.bulk_create([model(cluster_id=c, **{field: v}) for c, v in missing], ignore_conflicts=True)
        ids = known_ids(model, field, keys)
    return ids
