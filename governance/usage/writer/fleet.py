"""Clusters, nodes and GPUs of a batch: ids for the new ones, and facts folded into the known ones."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from governance.fleet.models import Cluster, Gpu, Node
from governance.usage.marks import MAX_MARKED_DAYS
from governance.usage.models import PricingMark
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


GPUS_STORED = """
SELECT c.name, g.uuid, n.name, g.last_seen_at FROM fleet_gpu g
JOIN unnest(%s::int8[], %s::text[]) AS k (cluster_id, uuid) ON g.cluster_id = k.cluster_id AND g.uuid = k.uuid
JOIN fleet_node n ON n.id = g.node_id JOIN fleet_cluster c ON c.id = g.cluster_id
"""


def gpus_stored(gpus: Sequence[GpuFacts], cluster_ids: dict[str, int]) -> dict[tuple[str, str], tuple[str, datetime]]:
    """(cluster name, uuid) -> (node name, last seen) of those of `gpus` the fleet knows (PostgreSQL)."""
    keys = sorted({(cluster_ids[g.cluster], g.uuid) for g in gpus})
    with connection.cursor() as cursor:
        cursor.execute(GPUS_STORED, [[c for c, _ in keys], [u for _, u in keys]])
        return {(cluster, uuid): (node, seen) for cluster, uuid, node, seen in cursor.fetchall()}


# A GPU silent for longer than GOVERNANCE_GPU_GONE_AFTER_HOURS looked gone: the cluster-days priced meanwhile
# counted it out of capacity from its last report on. Reporting again it counts across the silence (capacity runs
# from a GPU's first report to its last, or to now within the grace): its cluster's days from the last report it
# had to this one are marked (job-less marks: the capacity of the day), at most MAX_MARKED_DAYS back.
SEEN_AGAIN_MARK = """
INSERT INTO usage_pricingmark (job_id, cluster_id, day)
SELECT DISTINCT NULL::int8, g.cluster_id, d::date
FROM unnest(%s::int8[], %s::text[], %s::timestamptz[]) AS b(cluster_id, uuid, first_seen)
JOIN fleet_gpu g ON g.cluster_id = b.cluster_id AND g.uuid = b.uuid
CROSS JOIN LATERAL generate_series(
    (GREATEST(g.last_seen_at, b.first_seen - %s * interval '1 day') AT TIME ZONE 'UTC')::date,
    (b.first_seen AT TIME ZONE 'UTC')::date, interval '1 day') AS d
WHERE b.first_seen - g.last_seen_at > %s * interval '1 hour'
"""


def _seen_again_params(gpus: Sequence[GpuFacts], cluster_ids: dict[str, int]) -> list[Any]:
    return [[cluster_ids[g.cluster] for g in gpus], [g.uuid for g in gpus], [g.first_seen for g in gpus],
            MAX_MARKED_DAYS, settings.GOVERNANCE_GPU_GONE_AFTER_HOURS]  # fmt: skip


def _seen_again_marks(gpus: Sequence[GpuFacts], cluster_ids: dict[str, int]) -> None:
    """SEEN_AGAIN_MARK without PostgreSQL's arrays (SQLite)."""
    grace = timedelta(hours=settings.GOVERNANCE_GPU_GONE_AFTER_HOURS)
    last = {(c, u): seen for c, u, seen in Gpu.objects.filter(
        cluster_id__in=set(cluster_ids.values()), uuid__in={g.uuid for g in gpus}
    ).values_list("cluster_id", "uuid", "last_seen_at")}  # fmt: skip
    days: set[tuple[int, date]] = set()
    for g in gpus:
        cid = cluster_ids[g.cluster]
        before = last.get((cid, g.uuid))
        if before is None or g.first_seen - before <= grace:
            continue
        day, upto = max(before, g.first_seen - timedelta(days=MAX_MARKED_DAYS)).date(), g.first_seen.date()
        while day <= upto:
            days.add((cid, day))
            day += timedelta(days=1)
    PricingMark.objects.bulk_create([PricingMark(job_id=None, cluster_id=c, day=d) for c, d in sorted(days)])


def fleet_touch(gpus: Sequence[GpuFacts], cluster_ids: dict[str, int]) -> None:
    """Mark the batch's nodes seen and fold its facts into its GPUs: short row locks, in a fixed order. The days
    of a GPU that looked gone and reports again are marked for pricing first (SEEN_AGAIN_MARK)."""
    if not gpus:
        return
    node_ids = nodes_ensure({(cluster_ids[g.cluster], g.node) for g in gpus})
    upsert, params = _gpus_upsert(gpus, cluster_ids, node_ids, facts=True)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":  # marks, nodes, then GPUs, in one round trip
            cursor.execute(
                f"{SEEN_AGAIN_MARK};\n{NODES_TOUCH};\n{upsert}",
                [*_seen_again_params(gpus, cluster_ids), timezone.now(), sorted(node_ids.values()), *params],
            )
            return
        _seen_again_marks(gpus, cluster_ids)
        Node.objects.filter(pk__in=node_ids.values()).update(last_seen_at=timezone.now())  # SQLite: no row locks
        cursor.execute(upsert, params)
