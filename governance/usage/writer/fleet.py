"""Clusters, nodes and GPUs of a batch: ids for the new ones, and facts folded into the known ones."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection
from django.utils import timezone

from governance.fleet.models import Cluster, Gpu, Node
from governance.usage.prepared import GpuFacts
from governance.usage.writer.sql import ids_ensure, known_ids

# The lookups every batch makes, as fixed statements on PostgreSQL: building the same ORM query for each batch
# cost more than running it.
KNOWN_CLUSTERS = "SELECT name, id FROM fleet_cluster WHERE name = ANY(%s)"


def _known_clusters(names: set[str]) -> dict[str, int]:
    if connection.vendor != "postgresql":
        return dict(Cluster.objects.filter(name__in=names).values_list("name", "id"))
    with connection.cursor() as cursor:
        cursor.execute(KNOWN_CLUSTERS, [sorted(names)])
        return dict(cursor.fetchall())


def clusters_ensure(names: Iterable[str]) -> dict[str, int]:
    names = set(names)
    known = _known_clusters(names)
    if len(known) < len(names):  # only a new cluster costs a write
        Cluster.objects.bulk_create([Cluster(name=n) for n in names - known.keys()], ignore_conflicts=True)
        known = _known_clusters(names)
    return known


def nodes_ensure(keys: set[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """(cluster id, node name) -> node id, creating the nodes not seen before (no lock on known ones)."""
    return ids_ensure(Node, "name", keys)


# The node rows are locked by ascending id before they are updated: an UPDATE takes its row locks in scan
# order, which differs between two workers updating the same rows (new row versions move). NO KEY: the
# foreign-key checks of another worker's commit (KEY SHARE on the same nodes) do not wait for these locks.
NODES_TOUCH = """
UPDATE fleet_node SET last_seen_at = %s
WHERE id IN (SELECT id FROM fleet_node WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE)
"""


GPU_COLUMNS = (
    ("cluster_id", "int8"), ("uuid", "text"), ("node_id", "int8"), ('"index"', "int4"), ("model", "text"),
    ("memory_total_mib", "float8"), ("numa_node", "int4"), ("mig_profile", "text"), ("first_seen_at", "timestamptz"),
    ("last_seen_at", "timestamptz"), ("introduced_by_id", "int8"),
)  # fmt: skip
# PostgreSQL takes the GPUs as one array per column: the statement's text is the same for every batch (and
# psycopg's conversion of it cached), where a VALUES list would be a new text per batch size.
GPU_ROWS = {
    "postgresql": "SELECT * FROM unnest({})".format(", ".join(f"%s::{t}[]" for _, t in GPU_COLUMNS)),
    "sqlite": "VALUES {}",
}
GPU_UPSERT = f"""
INSERT INTO fleet_gpu ({", ".join(c for c, _ in GPU_COLUMNS)})
{{rows}}
ON CONFLICT (cluster_id, uuid) DO {{action}}
"""
GPU_FACTS_NEWER = """UPDATE SET
    node_id = CASE WHEN {newer} THEN excluded.node_id ELSE fleet_gpu.node_id END,
    "index" = CASE WHEN {newer} THEN excluded."index" ELSE fleet_gpu."index" END,
    model = CASE WHEN {newer} THEN excluded.model ELSE fleet_gpu.model END,
    memory_total_mib = CASE WHEN {newer} AND excluded.memory_total_mib IS NOT NULL THEN excluded.memory_total_mib
        ELSE fleet_gpu.memory_total_mib END,
    numa_node = CASE WHEN {newer} THEN excluded.numa_node ELSE fleet_gpu.numa_node END,
    mig_profile = CASE WHEN {newer} THEN excluded.mig_profile ELSE fleet_gpu.mig_profile END,
    first_seen_at = {least}(fleet_gpu.first_seen_at, excluded.first_seen_at),
    last_seen_at = {greatest}(fleet_gpu.last_seen_at, excluded.last_seen_at)"""


def _gpus_upsert(
    gpus: Sequence[GpuFacts], cluster_ids: dict[str, int], node_ids: dict, *, facts: bool, token_id: int | None = None
) -> tuple[str, list[Any]]:
    """One statement for the batch's GPUs, in (cluster, uuid) order, and its parameters: insert the new ones (as
    introduced by `token_id`); with `facts`, also fold the batch's facts into the known ones (a later sample's
    facts win)."""
    postgres = connection.vendor == "postgresql"
    rows = []
    for g in sorted(gpus, key=lambda g: (cluster_ids[g.cluster], g.uuid)):
        cid = cluster_ids[g.cluster]
        rows.append((
            cid, g.uuid, node_ids[(cid, g.node)], g.index, g.model, g.mem_total_mib, g.numa_node, g.mig_profile,
            g.first_seen, g.last_seen, token_id,
        ))  # fmt: skip
    if postgres:
        params: list[object] = [list(column) for column in zip(*rows, strict=True)]
        values = GPU_ROWS["postgresql"]
    else:
        adapt = connection.ops.adapt_datetimefield_value
        params = [v for row in rows for v in (*row[:8], adapt(row[8]), adapt(row[9]), row[10])]
        values = GPU_ROWS["sqlite"].format(", ".join([f"({', '.join(['%s'] * len(GPU_COLUMNS))})"] * len(rows)))
    action = "NOTHING"
    if facts:
        action = GPU_FACTS_NEWER.format(
            newer="excluded.last_seen_at >= fleet_gpu.last_seen_at",
            least="LEAST" if postgres else "min",
            greatest="GREATEST" if postgres else "max",
        )
    return GPU_UPSERT.format(rows=values, action=action), params


def gpu_ids_ensure(gpus: Sequence[GpuFacts], cluster_ids: dict[str, int], *, token_id: int | None = None) -> list[int]:
    """Ids of the batch's GPUs, in the same order; new GPUs (and their nodes) are created, as introduced by
    `token_id`. Known GPUs are not locked here: their facts are folded in by `fleet_touch`, at the end of the
    transaction."""
    keys = {(cluster_ids[g.cluster], g.uuid) for g in gpus}
    ids = known_ids(Gpu, "uuid", keys)
    if len(ids) < len(keys):
        new = [g for g in gpus if (cluster_ids[g.cluster], g.uuid) not in ids]
        node_ids = nodes_ensure({(cluster_ids[g.cluster], g.node) for g in new})
        with connection.cursor() as cursor:
            cursor.execute(*_gpus_upsert(new, cluster_ids, node_ids, facts=False, token_id=token_id))
        ids = known_ids(Gpu, "uuid", keys)
    return [ids[(cluster_ids[g.cluster], g.uuid)] for g in gpus]


def fleet_touch(gpus: Sequence[GpuFacts], cluster_ids: dict[str, int]) -> None:
    """Mark the batch's nodes seen and fold its facts into its GPUs: short row locks, in a fixed order."""
    if not gpus:
        return
    node_ids = nodes_ensure({(cluster_ids[g.cluster], g.node) for g in gpus})
    upsert, params = _gpus_upsert(gpus, cluster_ids, node_ids, facts=True)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":  # nodes, then GPUs, in one round trip
            cursor.execute(f"{NODES_TOUCH};\n{upsert}", [timezone.now(), sorted(node_ids.values()), *params])
            return
        Node.objects.filter(pk__in=node_ids.values()).update(last_seen_at=timezone.now())  # SQLite: no row locks
        cursor.execute(upsert, params)
