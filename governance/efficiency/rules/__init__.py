"""The efficiency rules: one module per rule, each a pure function from a JobSummary to drafts of findings."""

from __future__ import annotations

from governance.efficiency.rules import (  # noqa: F401  (each module registers its rule on import)
    batch_headroom,
    comm_bound,
    data_starved,
    idle_gpu,
    inference_oversized,
    low_utilization,
    memory_bound,
    mig_fit,
    numa_misaligned,
    overallocated,
    share_oversized,
    time_slice_contention,
    topology_split,
    whole_gpu_share_fit,
)
from governance.efficiency.rules.base import Draft, registry
from governance.efficiency.summary import JobSummary
from governance.efficiency.thresholds import Thresholds

RULES: tuple[str, ...] = tuple(registry.checks)


def rules_evaluate(summary: JobSummary, thresholds: Thresholds) -> list[Draft]:
    """Every rule's drafts for one job; nothing before the job has run the minimum time or sent a sample that
    knew its SM (a GPU whose SM is unknown is neither idle nor busy)."""
    if summary.runtime_hours * 60 < thresholds.min_runtime_minutes or not summary.sm_known:
        return []
    return [draft for check in registry.checks.values() for draft in check(summary, thresholds)]
