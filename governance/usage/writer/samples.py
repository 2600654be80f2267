"""Insert the staged samples (a reading stored before is skipped) and aggregate those written per job, GPU, hour."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from django.conf import settings
from django.db import IntegrityError, connection

from governance.usage import prepared
from governance.usage.writer.sql import (
    GROUP_STAGE,
    HOUR_COLUMNS,
    HOUR_STAGE,
    POSTGRES_GROUP_TERMS,
    POSTGRES_TERMS,
    SAMPLE_COLUMNS,
    STAGE,
    execute_in_turn,
    for_vendor,
)
from governance.usage.writer.stage import samples_stage, samples_stage_group

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
_SKIPPING = """
WITH written AS (
    {insert}
    ON CONFLICT (gpu_id, ts) DO NOTHING
    RETURNING {returning}
)
{aggregate}
"""

# PostgreSQL, first try: a batch of readings none of which is stored yet (the usual case) goes in by a plain
# INSERT, which the unique index checks as it writes, and is aggregated straight from the stage. Skipping the
# ON CONFLICT arbiter's speculative insertion and the RETURNING of every row halves what the insert costs. A
# reading stored before (or twice in the batch) fails the statement: `samples_write` rolls back to the savepoint
# and writes the batch by the skipping statement instead. The savepoint is taken and released in the same round
# trip as the insert (three round trips were two thirds of what a 2,000-record batch's write waited for).
NEW_SAMPLES_SAVEPOINT = "usage_new_samples"
_NEW = """
SAVEPOINT {savepoint};
{insert};
{aggregate};
RELEASE SAVEPOINT {savepoint}
"""

# After a duplicate broke the plain insert: back to the savepoint, and the batch written again, skipping what is
# stored (one round trip).
_UNDO = """
ROLLBACK TO SAVEPOINT {savepoint};
RELEASE SAVEPOINT {savepoint};
"""


def _statements(terms: dict[str, str], stage: str) -> tuple[str, str, str]:
    """The skipping write, the first try and the undo-then-skip of a staging table, for its terms."""
    skipping = _SKIPPING.format(
        insert=INSERT_SAMPLES.format(**terms, stage=stage),
        returning=", ".join(AGGREGATED_COLUMNS),
        aggregate=AGGREGATE_HOURS.format(**{**terms, **_WRITTEN}),
    )
    new = _NEW.format(
        savepoint=NEW_SAMPLES_SAVEPOINT,
        insert=INSERT_SAMPLES.format(**terms, stage=stage),
        aggregate=AGGREGATE_HOURS.format(**terms, stage=stage),
    )
    return skipping, new, _UNDO.format(savepoint=NEW_SAMPLES_SAVEPOINT) + skipping


WRITE_SAMPLES_POSTGRES, WRITE_NEW_SAMPLES_POSTGRES, UNDO_AND_WRITE_SAMPLES_POSTGRES = _statements(POSTGRES_TERMS, STAGE)
# The same for several batches staged together (samples_write_group).
_, WRITE_NEW_GROUP_SAMPLES, UNDO_AND_WRITE_GROUP_SAMPLES = _statements(POSTGRES_GROUP_TERMS, GROUP_STAGE)

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
        _written(WRITE_NEW_SAMPLES_POSTGRES, UNDO_AND_WRITE_SAMPLES_POSTGRES, params)
        return
    execute_in_turn([for_vendor(s) for s in (*UNSTAGE_STORED_SQLITE, INSERT_SAMPLES, AGGREGATE_HOURS)], params)


def _written(first_try: str, undo_and_skip: str, params: dict[str, object]) -> None:
    try:
        execute_in_turn([first_try], params)
    except IntegrityError as exc:
        if not isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
            raise  # the transaction is broken: the caller's atomic block rolls it back
        # A duplicate undoes the plain insert only (and whatever of the aggregate ran).
        execute_in_turn([undo_and_skip], params)


def samples_write_group(
    parts: Sequence[tuple[list[tuple] | memoryview, int]],
    gpu_ids: Sequence[Sequence[int]],
    job_ids: Sequence[Sequence[int]],
) -> None:
    """`samples_write` for several batches at once (PostgreSQL): `parts` holds each batch's `(rows, readings)`, and
    `gpu_ids` and `job_ids` each batch's ids by header position. The rows are staged together and go in by one
    insert and one aggregate, as one batch of all of them would: a reading stored before, or in two of the batches,
    is written once."""
    if not connection.in_atomic_block:
        raise RuntimeError("samples_write_group must run inside a transaction (the staging table is per transaction)")
    samples_stage_group(parts)
    params = {
        "idle": settings.GOVERNANCE_IDLE_SM_PERCENT,
        "gpu_ids": [pk for ids in gpu_ids for pk in ids],
        "job_ids": [pk for ids in job_ids for pk in ids],
        "gpu_offsets": _offsets(gpu_ids),
        "job_offsets": _offsets(job_ids),
    }
    _written(WRITE_NEW_GROUP_SAMPLES, UNDO_AND_WRITE_GROUP_SAMPLES, params)


def _offsets(ids: Sequence[Sequence[int]]) -> list[int]:
    """Where each batch's ids start in the concatenated array, less one (header positions count from 1)."""
    offsets, start = [], 0
    for batch in ids:
        offsets.append(start)
        start += len(batch)
    return offsets
