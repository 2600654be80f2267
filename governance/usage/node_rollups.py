"""The node rollups (`NodeHour`, `NodeDay`) as sums of the GPU-hours: ingest folds them batch by batch
(governance/usage/writer/rollups.py); this sums them whole, to fill them and to check them."""

from __future__ import annotations

from django.db import connection

# Each rollup's key over the GPU-hours, per database.
GRAINS = {
    "usage_nodehour": ("hour", {"postgresql": "h.hour", "sqlite": "h.hour"}),
    "usage_nodeday": ("day", {"postgresql": "(h.hour AT TIME ZONE 'UTC')::date", "sqlite": "date(h.hour)"}),
}
SUMMED = """
SELECT g.node_id, {key} AS k, sum(h.samples) AS samples, sum(h.sm_samples) AS sm_samples, sum(h.sm_sum) AS sm_sum
FROM usage_gpuhour h JOIN fleet_gpu g ON g.id = h.gpu_id GROUP BY g.node_id, {key}
"""


def node_rollups_rebuild() -> None:
    """Sum both node rollups again from the GPU-hours (a rollup written by hand, as some benches do)."""
    with connection.cursor() as cursor:
        for table, (column, keys) in GRAINS.items():
            cursor.execute(f"DELETE FROM {table}")  # noqa: S608
            cursor.execute(
                f"INSERT INTO {table} (node_id, {column}, samples, sm_samples, sm_sum)"  # noqa: S608
                f" SELECT node_id, k, samples, sm_samples, sm_sum FROM ({SUMMED.format(key=keys[connection.vendor])}) s"
            )


def node_rollups_drift(*, per: str = "node") -> dict[str, list]:
    """Per node rollup, its keys whose sums differ from the GPU-hours' (empty: equal), per node or per cluster.

    Per cluster holds whatever ingest saw: a GPU that moved to another node keeps its earlier hours on the node
    it reported from, where the GPU-hours now sum them under its current node."""
    out: dict[str, list] = {}
    owner = "g.node_id" if per == "node" else "g.cluster_id"
    rolled_owner = "r.node_id" if per == "node" else "n.cluster_id"
    with connection.cursor() as cursor:
        for table, (column, keys) in GRAINS.items():
            key = keys[connection.vendor]
            cursor.execute(
                f"SELECT {owner}, {key}, sum(h.samples), sum(h.sm_samples), sum(h.sm_sum)"  # noqa: S608
                f" FROM usage_gpuhour h JOIN fleet_gpu g ON g.id = h.gpu_id GROUP BY {owner}, {key}"
            )
            expected = {(o, str(k)): (int(s), int(m), x) for o, k, s, m, x in cursor.fetchall()}
            cursor.execute(
                f"SELECT {rolled_owner}, r.{column}, sum(r.samples), sum(r.sm_samples), sum(r.sm_sum)"  # noqa: S608
                f" FROM {table} r JOIN fleet_node n ON n.id = r.node_id GROUP BY {rolled_owner}, r.{column}"
            )
            actual = {(o, str(k)): (int(s), int(m), x) for o, k, s, m, x in cursor.fetchall()}
            out[table] = sorted(k for k in expected.keys() | actual.keys() if not _same(expected.get(k), actual.get(k)))
    return out


def _same(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None:
        return a is b
    return a[0] == b[0] and a[1] == b[1] and abs(a[2] - b[2]) <= 1e-6 * max(1.0, abs(a[2]))
