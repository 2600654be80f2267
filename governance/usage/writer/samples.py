"""Insert the staged samples (a reading stored before is skipped) and aggregate those written per job, GPU, hour."""

from __future__ import annotations

import psycopg
from django.conf import settings
from django.db import IntegrityError, connection

from governance.usage import prepared
from governance.usage.writer.sql import (
    HOUR_COLUMNS,
    HOUR_STAGE,
    POSTGRES_TERMS,
    SAMPLE_COLUMNS,
    STAGE,
    execute_in_turn,
    for_vendor,
)
from governance.usage.writer.stage import samples_stage

INSERT_SAMPLES = (
    f"INSERT INTO usage_sample ({', '.join(SAMPLE_COLUMNS)})"
    f" SELECT ts, {{gpu}}, {{job}}, {', '.join(prepared.READING_COLUMNS)} FROM {{stage}}"
)

AGGREGATE_HOURS = f"""
INSERT INTO {HOUR_STAGE} ({", ".join(HOUR_COLUMNS)})
SELECT {{job}}, {{gpu}}, {{hour}}, count(*), count(sm_util), count(*) FILTER (WHERE sm_util < %(idle)s),
    coalesce(sum(sm_util), 0), max(sm_util), coalesce(sum(sm_util * sm_util), 0), max(mem_used_mib),
    max(mem_total_mib), coalesce(sum(power_w), 0),
    count(power_w), count(*) FILTER (WHERE {{mismatch}}), coalesce(sum(io_wait), 0), count(io_wait),
    coalesce(sum(host_cpu_util), 0), count(host_cpu_util), coalesce(sum(tensor_active), 0), count(tensor_active),
    coalesce(sum(dram_active), 0), count(dram_active), coalesce(sum(nvlink_mibps), 0), count(nvlink_mibps),
    coalesce(sum(coalesce(pcie_rx_mibps, 0) + coalesce(pcie_tx_mibps, 0)), 0),
    count(*) FILTER (WHERE pcie_rx_mibps IS NOT NULL OR pcie_tx_mibps IS NOT NULL),
    coalesce(sum(job_sm_util), 0), count(job_sm_util)
FROM {{stage}} GROUP BY {{job_key}}, {{gpu_key}}, {{hour}}
"""


# The columns the hour aggregate reads from the rows an insert wrote.
AGGREGATED_COLUMNS = (
    "ts", "gpu_id", "job_id", "sm_util", "mem_used_mib", "mem_total_mib", "power_w", "gpu_numa_node", "cpu_numa_mask",
    "io_wait", "host_cpu_util", "tensor_active", "dram_active", "nvlink_mibps", "pcie_rx_mibps", "pcie_tx_mibps",
    "job_sm_util",
)  # fmt: skip

# PostgreSQL: a reading already stored (same GPU and time, from any batch, or twice in this one) is skipped by
# the unique index, and only the rows the insert wrote are aggregated, so a replay counts once in the rollups
# too. Concurrent workers writing the same reading wait on the index entry, then skip it. The insert maps header
# positions to ids; the aggregate reads the ids the insert returned.
_WRITTEN = {"stage": "written", "gpu": "gpu_id", "job": "job_id", "gpu_key": "gpu_id", "job_key": "job_id"}
WRITE_SAMPLES_POSTGRES = f"""
WITH written AS (
    {INSERT_SAMPLES.format(**POSTGRES_TERMS, stage=STAGE)}
    ON CONFLICT (gpu_id, ts) DO NOTHING
    RETURNING {", ".join(AGGREGATED_COLUMNS)}
)
{AGGREGATE_HOURS.format(**{**POSTGRES_TERMS, **_WRITTEN})}
"""

# PostgreSQL, first try: a batch of readings none of which is stored yet (the usual case) goes in by a plain
# INSERT, which the unique index checks as it writes, and is aggregated straight from the stage. Skipping the
# ON CONFLICT arbiter's speculative insertion and the RETURNING of every row halves what the insert costs. A
# reading stored before (or twice in the batch) fails the statement: `samples_write` rolls back to the savepoint
# and writes the batch by WRITE_SAMPLES_POSTGRES instead. The savepoint is taken and released in the same round
# trip as the insert (three round trips were two thirds of what a 2,000-record batch's write waited for).
NEW_SAMPLES_SAVEPOINT = "usage_new_samples"
WRITE_NEW_SAMPLES_POSTGRES = f"""
SAVEPOINT {NEW_SAMPLES_SAVEPOINT};
{INSERT_SAMPLES.format(**POSTGRES_TERMS, stage=STAGE)};
{AGGREGATE_HOURS.format(**POSTGRES_TERMS, stage=STAGE)};
RELEASE SAVEPOINT {NEW_SAMPLES_SAVEPOINT}
"""

# After a duplicate broke the plain insert: back to the savepoint, and the batch written again, skipping what is
# stored (one round trip).
UNDO_AND_WRITE_SAMPLES_POSTGRES = f"""
ROLLBACK TO SAVEPOINT {NEW_SAMPLES_SAVEPOINT};
RELEASE SAVEPOINT {NEW_SAMPLES_SAVEPOINT};
{WRITE_SAMPLES_POSTGRES}"""

# SQLite (one writer at a time): the staged readings already stored, or staged twice, leave the stage first.
UNSTAGE_STORED_SQLITE = (
    "DELETE FROM {stage} WHERE rowid NOT IN (SELECT min(rowid) FROM {stage} GROUP BY gpu_id, ts)",
    "DELETE FROM {stage} WHERE EXISTS"
    " (SELECT 1 FROM usage_sample s WHERE s.gpu_id = {stage}.gpu_id AND s.ts = {stage}.ts)",
)


def samples_write(
    rows: list[tuple] | memoryview, gpu_ids: list[int], job_ids: list[int], readings: int = len(prepared.READINGS)
) -> None:
    """Append staging rows to the samples, skipping readings stored before, and aggregate those written per job,
    GPU and hour, set-based (no row locks)."""
    if not connection.in_atomic_block:
        raise RuntimeError("samples_write must run inside a transaction (the staging table is per transaction)")
    samples_stage(rows, gpu_ids, job_ids, readings)
    params: dict[str, object] = {"idle": settings.GOVERNANCE_IDLE_SM_PERCENT}
    if connection.vendor == "postgresql":
        params.update(gpu_ids=gpu_ids, job_ids=job_ids)
        try:
            execute_in_turn([WRITE_NEW_SAMPLES_POSTGRES], params)
        except IntegrityError as exc:
            if not isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise  # the transaction is broken: the caller's atomic block rolls it back
            # A duplicate undoes the plain insert only (and whatever of the aggregate ran).
            execute_in_turn([UNDO_AND_WRITE_SAMPLES_POSTGRES], params)
        return
    execute_in_turn([for_vendor(s) for s in (*UNSTAGE_STORED_SQLITE, INSERT_SAMPLES, AGGREGATE_HOURS)], params)
