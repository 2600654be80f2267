"""Fold a batch's hour aggregate into the hourly rollups and the node rollups, and mark the days it touched for
pricing."""

from __future__ import annotations

from governance.usage.writer.sql import HOUR_COLUMNS, HOUR_STAGE, HOURS, execute_in_turn, for_vendor

GPU_HOUR_FOLDS = {
    "samples": "sum", "allocated_samples": "sum", "sm_samples": "sum", "idle_samples": "sum", "sm_sum": "sum",
    "mem_used_max": "max", "power_sum": "sum", "power_samples": "sum",
}  # fmt: skip


def _folded(table: str, folds: dict[str, str]) -> str:
    """The SET list of a rollup upsert: sums add up, maxima keep the greater (an unknown maximum, null, gives way to
    a known one; SQLite's max() of a null is null, hence the coalesces)."""
    return ",\n    ".join(
        f"{c} = {table}.{c} + excluded.{c}"
        if how == "sum"
        else f"{c} = {{greatest}}(coalesce({table}.{c}, excluded.{c}), coalesce(excluded.{c}, {table}.{c}))"
        for c, how in folds.items()
    )


# Each rollup upsert takes its row locks in key order (ORDER BY the ids), so two workers folding batches
# into the same hours wait for each other rather than deadlock.
UPSERT_JOB_HOURS = f"""
INSERT INTO usage_jobgpuhour ({", ".join(HOUR_COLUMNS)})
SELECT {", ".join(HOUR_COLUMNS)} FROM {HOUR_STAGE} WHERE job_id IS NOT NULL ORDER BY job_id, gpu_id, hour
ON CONFLICT (job_id, gpu_id, hour) DO UPDATE SET
    {_folded("usage_jobgpuhour", {name: how for name, _, how in HOURS if how})}
"""

UPSERT_GPU_HOURS = f"""
INSERT INTO usage_gpuhour (gpu_id, hour, {", ".join(GPU_HOUR_FOLDS)})
SELECT gpu_id, hour, sum(samples), sum(CASE WHEN job_id IS NULL THEN 0 ELSE samples END), sum(sm_samples),
    sum(idle_samples), sum(sm_sum), max(mem_used_max), sum(power_sum), sum(power_samples)
FROM {HOUR_STAGE} GROUP BY gpu_id, hour ORDER BY gpu_id, hour
ON CONFLICT (gpu_id, hour) DO UPDATE SET
    {_folded("usage_gpuhour", GPU_HOUR_FOLDS)}
"""

# The node rollups the heatmap reads, summed from the same aggregate in the same transaction: a reading skipped
# as stored before is in none of the three, so they agree under replays. Locks in key order, as above.
NODE_FOLDS = {"samples": "sum", "sm_samples": "sum", "sm_sum": "sum"}
_NODE_SUMS = "sum(s.samples), sum(s.sm_samples), sum(s.sm_sum)"
UPSERT_NODE_HOURS = f"""
INSERT INTO usage_nodehour (node_id, hour, {", ".join(NODE_FOLDS)})
SELECT g.node_id, s.hour, {_NODE_SUMS} FROM {HOUR_STAGE} s JOIN fleet_gpu g ON g.id = s.gpu_id
GROUP BY g.node_id, s.hour ORDER BY g.node_id, s.hour
ON CONFLICT (node_id, hour) DO UPDATE SET
    {_folded("usage_nodehour", NODE_FOLDS)}
"""
UPSERT_NODE_DAYS = f"""
INSERT INTO usage_nodeday (node_id, day, {", ".join(NODE_FOLDS)})
SELECT g.node_id, {{stage_day}}, {_NODE_SUMS} FROM {HOUR_STAGE} s JOIN fleet_gpu g ON g.id = s.gpu_id
GROUP BY g.node_id, {{stage_day}} ORDER BY g.node_id, {{stage_day}}
ON CONFLICT (node_id, day) DO UPDATE SET
    {_folded("usage_nodeday", NODE_FOLDS)}
"""

# The days the batch touched, for the pricing worker: each job's day, and each cluster's day (no job) for the
# capacity its GPUs add. Appended, never updated: no lock, no wait on pricing.
MARK_DAYS = f"""INSERT INTO usage_pricingmark (job_id, cluster_id, day)
SELECT DISTINCT s.job_id, g.cluster_id, {{stage_day}} FROM {HOUR_STAGE} s JOIN fleet_gpu g ON g.id = s.gpu_id"""


def rollups_fold() -> None:
    """Fold the aggregate `samples_write` left into the hourly rollups and the node rollups (row locks in key
    order), and mark the days it touched for pricing."""
    execute_in_turn(
        [for_vendor(s) for s in (UPSERT_JOB_HOURS, UPSERT_GPU_HOURS, UPSERT_NODE_HOURS, UPSERT_NODE_DAYS, MARK_DAYS)]
    )
