"""Small batches written together: which of a group's batches can be written as one, and their GPUs merged.

A worker writes a group of small batches (services.usage_batch_process) in runs: each run is written as one batch of
all its records would be, and that must leave what writing its batches alone, in turn, leaves. Three things a batch
written alone decides from what the batches before it left, and which a run decides once for all of them:

- the node a GPU's samples are summed under (the node rollups): its node once the batch's facts are folded in, which
  a later sample's facts replace. In a run a GPU keeps one node: a batch that moves a GPU (a later sample, another
  node) starts a new run;
- the days of a GPU that looked gone and reports again (writer.fleet.SEEN_AGAIN_MARK): a silence longer than
  GOVERNANCE_GPU_GONE_AFTER_HOURS before a batch's first sample of the GPU. A run checks it once, from its earliest
  sample of the GPU: a batch with a silence after the run's last sample of a GPU, or a sample earlier than the
  run's first, starts a new run;
- how far a job's new record marks its days (governance.usage.marks): to its last sample folded into the rollups,
  which a run folds at its end. A batch with job records starts a new run, so the runs before it are folded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import msgspec

from governance.usage.prepared import GpuFacts, Header

GpuKey = tuple[str, str]  # (cluster name, GPU uuid)


@dataclass
class _InRun:
    node: str  # the node its samples in the run are summed under
    last_seen: datetime  # its latest sample so far (the stored one's included)
    first_seen: datetime  # its earliest sample in the run


def runs_planned(
    headers: Sequence[Header], stored: Mapping[GpuKey, tuple[str, datetime]], grace: timedelta
) -> list[range]:
    """Split a group's batches (their headers, in the order they are written) into runs, each written as one batch.

    `stored`: each known GPU's node and last sample as the database holds them before the group; `grace`: the
    silence after which a GPU looked gone."""
    runs: list[range] = []
    state = dict(stored)  # the database as the runs written so far leave it
    run: dict[GpuKey, _InRun] = {}
    start = 0
    for k, header in enumerate(headers):
        if k > start and (header.jobs or not all(_joins(g, run.get((g.cluster, g.uuid)), grace) for g in header.gpus)):
            runs.append(range(start, k))
            state.update({key: (r.node, r.last_seen) for key, r in run.items()})
            run, start = {}, k
        for g in header.gpus:
            key = (g.cluster, g.uuid)
            known = run.get(key)
            if known is None:
                node, last_seen = state.get(key) or (g.node, g.last_seen)
                if g.last_seen >= last_seen:  # its facts replace the stored ones (a later sample's, or the same)
                    node, last_seen = g.node, g.last_seen
                run[key] = _InRun(node=node, last_seen=last_seen, first_seen=g.first_seen)
            else:
                known.last_seen = max(known.last_seen, g.last_seen)
    runs.append(range(start, len(headers)))
    return runs


def _joins(g: GpuFacts, known: _InRun | None, grace: timedelta) -> bool:
    """Whether a batch's GPU `g` may join the run as it stands (`known`: the GPU in the run, None if not in it)."""
    if known is None:
        return True
    moved = g.last_seen >= known.last_seen and g.node != known.node
    return not moved and known.first_seen <= g.first_seen and g.first_seen - known.last_seen <= grace


def gpus_merged(headers: Sequence[Header]) -> list[GpuFacts]:
    """Each GPU of the batches once, as one batch of all their samples would give it: first and last seen across
    them, and the facts of its latest sample (a later batch's on a tie)."""
    merged: dict[GpuKey, GpuFacts] = {}
    for header in headers:
        for g in header.gpus:
            known = merged.get((g.cluster, g.uuid))
            if known is None:
                merged[(g.cluster, g.uuid)] = g
                continue
            latest = g if g.last_seen >= known.last_seen else known
            merged[(g.cluster, g.uuid)] = msgspec.structs.replace(
                latest, first_seen=min(g.first_seen, known.first_seen), last_seen=latest.last_seen
            )
    return list(merged.values())
