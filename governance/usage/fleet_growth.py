"""The fleet grows by evidence: the bounds a batch's samples must keep on the GPUs they name, checked at the edge.

- A node holds at most FLEET_MAX_GPUS_PER_NODE GPUs (a MIG instance counts as 1/7 of one): the GPUs a batch names
  on a node plus those the node reported within GOVERNANCE_GPU_GONE_AFTER_HOURS.
- One token introduces at most FLEET_MAX_NEW_GPUS_PER_TOKEN_HOUR new GPUs per cluster in an hour: beyond it the
  batch's records on new GPUs are refused, and the batch writes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from fractions import Fraction

from django.conf import settings
from django.db import connection
from django.db.models import Count

from collectors.records import Batch, BatchInvalid, RecordError, SampleRecord
from governance.fleet.models import Cluster, Gpu, Node

TOO_MANY_ON_NODE = "node {node} would hold {count} GPUs, more than FLEET_MAX_GPUS_PER_NODE ({limit})"
TOO_MANY_NEW = (
    "this token would introduce {count} new GPUs on cluster {cluster} within an hour, more than"
    " FLEET_MAX_NEW_GPUS_PER_TOKEN_HOUR ({limit}); an admin can raise it"
)
MIG_SHARE = Fraction(1, 7)
# The time compared in SQL: a bool back on either database, no timestamp to parse.
GPUS_NAMED = """
SELECT c.name, n.name, g.uuid, g.mig_profile, g.last_seen_at >= %s
FROM {gpu} g JOIN {node} n ON n.id = g.node_id JOIN {cluster} c ON c.id = g.cluster_id
WHERE c.name IN ({clusters}) AND (g.uuid IN ({uuids}) OR n.name IN ({nodes}))
"""
MAX_ERRORS = 100


def _weight(mig_profile: str | None) -> Fraction:
    return MIG_SHARE if mig_profile else Fraction(1)


def first_samples(batch: Batch) -> dict[tuple[str, str], tuple[int, SampleRecord]]:
    """(cluster, GPU uuid) -> (position, record) of each GPU's first sample in the batch."""
    first: dict[tuple[str, str], tuple[int, SampleRecord]] = {}
    for i, r in enumerate(batch.records):
        if type(r) is SampleRecord and (r.cluster, r.gpu_uuid) not in first:
            first[(r.cluster, r.gpu_uuid)] = (i, r)
    return first


def fleet_growth_check(
    *,
    batch: Batch,
    token_id: int | None,
    now: datetime,
    first: dict[tuple[str, str], tuple[int, SampleRecord]] | None = None,
) -> None:
    """Raise BatchInvalid, naming the records, where the batch's samples break a bound above. `token_id` None (an
    operator's import) is bound per node only. `first`: the batch's `first_samples`, when the caller found them
    already (governance/usage/prepared.py's one pass over the records)."""
    if first is None:
        first = first_samples(batch)
    if not first:
        return
    nodes = {(c, r.node) for (c, _), (_, r) in first.items()}
    present = now - timedelta(hours=settings.GOVERNANCE_GPU_GONE_AFTER_HOURS)
    known: set[tuple[str, str]] = set()
    held: dict[tuple[str, str], dict[str, Fraction]] = defaultdict(dict)
    for cluster, node, uuid, profile, recent in _gpus_named(first, nodes, present):
        if (cluster, uuid) in first:
            known.add((cluster, uuid))
        if recent and (cluster, node) in nodes:
            held[(cluster, node)][uuid] = _weight(profile)
    errors = _per_node(first, held) + _per_token(first, known, token_id, now)
    if errors:
        raise BatchInvalid(errors[:MAX_ERRORS])


def _gpus_named(first: dict, nodes: set[tuple[str, str]], present: datetime) -> list[tuple]:
    """(cluster, node, uuid, MIG profile, reported since `present`) of the batch's GPUs known already and of the
    GPUs on its nodes: one query for both bounds. Written out rather than built by the ORM, unordered: compiling the
    model's query (and its ordering's joins) was a third of the CPU a small batch's POST cost the web tier."""
    clusters, uuids, names = {c for c, _ in first}, {u for _, u in first}, {n for _, n in nodes}
    sql = GPUS_NAMED.format(
        gpu=Gpu._meta.db_table, node=Node._meta.db_table, cluster=Cluster._meta.db_table,
        clusters=_marks(clusters), uuids=_marks(uuids), nodes=_marks(names),
    )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(sql, [present, *clusters, *uuids, *names])
        return cursor.fetchall()


def _marks(values: set[str]) -> str:
    return ", ".join(["%s"] * len(values))


def _per_node(
    first: dict[tuple[str, str], tuple[int, SampleRecord]], held: dict[tuple[str, str], dict[str, Fraction]]
) -> list:
    """`held`: (cluster, node) -> {uuid: weight} of the GPUs each of the batch's nodes reported lately."""
    limit = settings.FLEET_MAX_GPUS_PER_NODE
    errors = []
    # Each node's count kept as it grows (a scrape of a large cluster names thousands of nodes' GPUs).
    counts = {node: sum(gpus.values(), Fraction(0)) for node, gpus in held.items()}
    for (cluster, uuid), (i, r) in sorted(first.items(), key=lambda item: item[1][0]):
        on_node = held[(cluster, r.node)]
        weight = _weight(r.mig_profile)
        count = counts[(cluster, r.node)] = counts.get((cluster, r.node), 0) + weight - on_node.get(uuid, 0)
        on_node[uuid] = weight
        if count > limit:
            reason = TOO_MANY_ON_NODE.format(node=r.node, count=int(count) + (count.denominator != 1), limit=limit)
            errors.append(RecordError(index=i, field="gpu_uuid", reason=reason))
    return errors


def _per_token(first: dict, known: set[tuple[str, str]], token_id: int | None, now: datetime) -> list:
    if token_id is None:
        return []
    limit = settings.FLEET_MAX_NEW_GPUS_PER_TOKEN_HOUR
    new: dict[str, list[int]] = defaultdict(list)
    for key, (i, _) in first.items():
        if key not in known:
            new[key[0]].append(i)
    if not new:
        return []
    recent = dict(
        Gpu.objects.filter(introduced_by_id=token_id, cluster__name__in=new, created_at__gte=now - timedelta(hours=1))
        .values("cluster__name")
        .annotate(n=Count("id"))
        .values_list("cluster__name", "n")
    )
    errors: list[RecordError] = []
    for cluster, indexes in sorted(new.items()):
        count = recent.get(cluster, 0) + len(indexes)
        if count > limit:
            reason = TOO_MANY_NEW.format(count=count, cluster=cluster, limit=limit)
            errors.extend(RecordError(index=i, field="gpu_uuid", reason=reason) for i in sorted(indexes))
    return errors
