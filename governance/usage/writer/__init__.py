"""Writes prepared batches, one module per stage: the inbox, ids for clusters, nodes, GPUs and jobs, merging job
records, staging samples, inserting them, rolling them up. `services` calls the stages through this package.

Samples go into a temporary staging table (PostgreSQL: binary COPY; SQLite: executemany), then into the sample
table and both hourly rollups with one set-based statement each.
"""

from governance.usage.writer.fleet import clusters_ensure, fleet_touch, gpu_ids_ensure, gpus_stored, nodes_ensure
from governance.usage.writer.inbox import (
    Attempt,
    Claimed,
    gc_paused,
    inbox_attempt_start,
    inbox_attempt_start_more,
    inbox_claim,
    inbox_claim_more,
    inbox_group_released,
    inbox_insert,
)
from governance.usage.writer.jobs import job_ids_ensure, jobs_apply, jobs_source_record, jobs_waiting_on_samples
from governance.usage.writer.rollups import MARK_DAYS, rollups_fold
from governance.usage.writer.samples import samples_write, samples_write_group
from governance.usage.writer.sql import SAMPLE_COLUMNS, SAMPLE_TYPES

__all__ = [
    "MARK_DAYS",
    "SAMPLE_COLUMNS",
    "SAMPLE_TYPES",
    "Attempt",
    "Claimed",
    "clusters_ensure",
    "fleet_touch",
    "gc_paused",
    "gpu_ids_ensure",
    "gpus_stored",
    "inbox_attempt_start",
    "inbox_attempt_start_more",
    "inbox_claim",
    "inbox_claim_more",
    "inbox_group_released",
    "inbox_insert",
    "job_ids_ensure",
    "jobs_apply",
    "jobs_source_record",
    "jobs_waiting_on_samples",
    "nodes_ensure",
    "rollups_fold",
    "samples_write",
    "samples_write_group",
]
