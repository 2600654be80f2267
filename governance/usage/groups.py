"""Batches written together: which of a group's batches can be written as one, their GPUs merged, the writes.

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
from django.conf import settings

from collectors.records import pod_namespace
from governance.lib.doors import Door, current_door, door_entered
from governance.usage import prepared, writer
from governance.usage.prepared import GpuFacts, Header, Prepared

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


def ingest_door(claimed: writer.Claimed) -> Door:
    """What a batch changes came through ingest, by the token that sent it (an import keeps its command's door)."""
    where = f"batch {claimed.batch_id}"
    if claimed.token_id is None or claimed.user_id is None:  # no token, or its token is gone
        return current_door() or Door(kind="ingest", where=where)
    return Door(kind="ingest", where=where, actor_name=claimed.user_name, user_id=claimed.user_id,
                token_id=claimed.token_id, token_name=claimed.token_name)  # fmt: skip


@dataclass(frozen=True)
class _Part:
    """One batch of a group: where it came from, what it holds, and its jobs' ids by header position."""

    claimed: writer.Claimed
    batch: Prepared
    job_ids: list[int]

    def models(self) -> dict[int, str]:
        return {pk: model for pk, (_, _, model) in zip(self.job_ids, self.batch.header.job_keys, strict=True)}

    def pods(self) -> dict[int, tuple[str, str]]:
        return {pk: (namespace, c) for pk, (c, e, _) in zip(self.job_ids, self.batch.header.job_keys, strict=True)
                if (namespace := pod_namespace(e))}  # fmt: skip


def group_write(claimed: list[writer.Claimed], *, create_projects: bool) -> tuple[int, int]:
    """Write several claimed batches of one token in the current transaction, in runs (`runs_planned`), each as
    `usage_prepared_write` writes one batch of all its records: the samples staged together, one insert and one
    aggregate, GPU facts and rollups folded once. Job records are merged batch by batch, in the order the batches
    arrived, each through its own batch's door, so a job's history names the batch that changed it. Returns how
    many job records and samples they held."""
    token_id = claimed[0].token_id
    batches = [prepared.decode(c.body) for c in claimed]
    headers = [b.header for b in batches]
    names = {g.cluster for h in headers for g in h.gpus} | {r.cluster for h in headers for r in h.jobs}
    names |= {c for h in headers for c, _, _ in h.job_keys}
    cluster_ids = writer.clusters_ensure(names)
    by_key = writer.job_ids_ensure((cluster_ids[c], e) for h in headers for c, e, _ in h.job_keys)
    parts = [
        _Part(c, b, [by_key[(cluster_ids[cl], e)] for cl, e, _ in b.header.job_keys])
        for c, b in zip(claimed, batches, strict=True)
    ]
    stored = writer.gpus_stored(gpus_merged(headers), cluster_ids)
    grace = timedelta(hours=settings.GOVERNANCE_GPU_GONE_AFTER_HOURS)
    for run in runs_planned(headers, stored, grace):
        _run_write([parts[k] for k in run], cluster_ids, create_projects=create_projects, token_id=token_id)
    return sum(len(h.jobs) for h in headers), sum(h.samples for h in headers)


def _run_write(parts: list[_Part], cluster_ids: dict[str, int], *, create_projects: bool, token_id: int | None) -> None:
    """One run of a group, as `usage_prepared_write` writes one batch of all its records."""
    headers = [p.batch.header for p in parts]
    gpus = gpus_merged(headers)
    samples = sum(h.samples for h in headers)
    if samples:
        ids = dict(zip(((g.cluster, g.uuid) for g in gpus), writer.gpu_ids_ensure(gpus, cluster_ids, token_id=token_id),
                       strict=True))  # fmt: skip
        writer.samples_write_group(
            [(p.batch.rows, p.batch.readings) for p in parts],
            [[ids[(g.cluster, g.uuid)] for g in h.gpus] for h in headers],
            [p.job_ids for p in parts],
        )
    waiting: set[int] = set()
    if samples:  # one look for the whole run; a batch whose samples change no job skips jobs_apply
        waiting = writer.jobs_waiting_on_samples({pk for p in parts for pk in p.job_ids},
                                                 {pk for p in parts for pk in p.pods()})  # fmt: skip
    for p in parts:
        models, pods = p.models(), p.pods()
        if not p.batch.header.jobs and not waiting & (models.keys() | pods.keys()):
            continue
        with door_entered(ingest_door(p.claimed)):
            writer.jobs_apply(p.batch.header.jobs, models, cluster_ids, create_projects=create_projects, pods=pods)
            if p.batch.header.jobs:
                writer.jobs_source_record(p.batch.header.jobs, cluster_ids, token_id)
    if samples:
        writer.fleet_touch(gpus, cluster_ids)
        writer.rollups_fold()
