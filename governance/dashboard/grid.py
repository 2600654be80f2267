"""The cells the cluster heatmap draws, aggregated in SQL: a row per GPU while the cluster's GPUs fit the page,
else a row per node, else per run of consecutive nodes (so a row is never thinner than a pixel); columns of
hours (days beyond two months), widened so the grid keeps to its cell budget. A node's own GPUs are one
drill-down away (`node=`). The database returns one row per cell, never one per GPU-hour."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import Count

from governance.fleet.models import Gpu, Node
from governance.usage.models import GpuHour

HOURLY_UP_TO = timedelta(days=62)
MAX_ROWS = 256  # 14 px a row and 4,000 px a chart at most
MAX_CELLS = 60_000

CELLS = """
SELECT r.row, floor(extract(epoch FROM h.hour - %(t0)s) / %(width)s)::int AS col, sum(h.sm_sum), sum(h.sm_samples)
FROM usage_gpuhour h JOIN fleet_gpu g ON g.id = h.gpu_id
JOIN unnest(%(keys)s::int8[], %(rows)s::int[]) AS r(key, row) ON r.key = g.{key}
WHERE g.cluster_id = %(cluster)s AND h.hour >= %(start)s AND h.hour < %(end)s AND h.samples > 0
GROUP BY 1, 2
"""


@dataclass(frozen=True)
class GpuGrid:
    """Rows (their labels), columns (each bucket's first moment) and mean SM % per cell (None: nothing reported).
    `per` says what a row is: "gpu", "node" or "nodes"; `nodes` names each row's node where a row is one node."""

    rows: list[str]
    columns: list[datetime]
    values: list[list[float | None]]
    step: timedelta
    per: str = "gpu"
    nodes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Rows:
    per: str
    keys: list[int]  # GPU ids (per GPU) or node ids
    index: list[int]  # the row each key falls in
    labels: list[str]
    nodes: list[str]


def bucket_floor(moment: datetime, daily: bool) -> datetime:
    moment = moment.replace(minute=0, second=0, microsecond=0)
    return moment.replace(hour=0) if daily else moment


def gpu_grid(
    *, cluster_id: int, start: datetime, end: datetime, node: str | None = None, max_rows: int | None = None,
    max_cells: int = MAX_CELLS,
) -> GpuGrid:  # fmt: skip
    """Mean SM % per cell of a cluster (or of one of its nodes) over [start, end)."""
    max_rows = MAX_ROWS if max_rows is None else max_rows
    daily = end - start > HOURLY_UP_TO
    step = timedelta(days=1) if daily else timedelta(hours=1)
    t0 = bucket_floor(start, daily)
    count = max(1, math.ceil((end - t0) / step))
    rows = _rows(cluster_id, node, max_rows)
    width = max(1, math.ceil(count / max(1, max_cells // max(1, len(rows.labels)))))
    columns = [t0 + step * width * i for i in range(math.ceil(count / width))]
    cells = _cells(cluster_id, start, end, t0, step * width, rows)
    present = sorted({r for r, _ in cells})
    values: list[list[float | None]] = [[None] * len(columns) for _ in present]
    position = {r: i for i, r in enumerate(present)}
    for (r, c), (sm, n) in cells.items():
        if 0 <= c < len(columns):
            values[position[r]][c] = sm / n if n else None  # SM unknown: a blank cell
    nodes = [rows.nodes[r] for r in present] if rows.per == "node" else []
    return GpuGrid([rows.labels[r] for r in present], columns, values, step * width, rows.per, nodes)


def _rows(cluster_id: int, node: str | None, max_rows: int) -> _Rows:
    gpus = Gpu.objects.filter(cluster_id=cluster_id)
    if node is not None:
        gpus = gpus.filter(node__name=node)
    if node is not None or gpus.count() <= max_rows:
        listed = sorted(gpus.values_list("node__name", "index", "pk"))
        # MIG instances of one GPU share its node:index and its row.
        slots = sorted({(n, i) for n, i, _ in listed})
        row_of = {slot: r for r, slot in enumerate(slots)}
        return _Rows("gpu", [pk for *_, pk in listed], [row_of[(n, i)] for n, i, _ in listed],
                     [f"{n}:{i}" for n, i in slots], [n for n, _ in slots])  # fmt: skip
    counted = list(Node.objects.filter(cluster_id=cluster_id).annotate(n=Count("gpus")).values_list("name", "pk", "n"))
    sizes = {pk: n for _, pk, n in counted}
    nodes = sorted((name, pk) for name, pk, _ in counted)
    if len(nodes) <= max_rows:
        labels = [f"{name} ({sizes[pk]} GPUs)" for name, pk in nodes]
        return _Rows("node", [pk for _, pk in nodes], list(range(len(nodes))), labels, [name for name, _ in nodes])
    per_row = math.ceil(len(nodes) / max_rows)
    runs = [nodes[i : i + per_row] for i in range(0, len(nodes), per_row)]
    labels = [f"{run[0][0]} … {run[-1][0]} ({len(run)} nodes)" for run in runs]
    return _Rows("nodes", [pk for _, pk in nodes], [i // per_row for i in range(len(nodes))], labels,
                 [run[0][0] for run in runs])  # fmt: skip


def _cells(cluster_id: int, start: datetime, end: datetime, t0: datetime, width: timedelta,
           rows: _Rows) -> dict[tuple[int, int], tuple[float, int]]:  # fmt: skip
    if connection.vendor == "postgresql":
        params: dict = {"t0": t0, "width": width.total_seconds(), "keys": rows.keys, "rows": rows.index,
                  "cluster": cluster_id, "start": start, "end": end}  # fmt: skip
        with connection.cursor() as cursor:
            cursor.execute(CELLS.format(key="id" if rows.per == "gpu" else "node_id"), params)
            return {(r, c): (sm or 0.0, n or 0) for r, c, sm, n in cursor.fetchall()}
    # The embedded default (SQLite, a demo's few GPUs): the same cells, summed here.
    row_of = dict(zip(rows.keys, rows.index, strict=True))
    key = "gpu_id" if rows.per == "gpu" else "gpu__node_id"
    out: dict[tuple[int, int], list] = defaultdict(lambda: [0.0, 0])
    hours = GpuHour.objects.filter(gpu__cluster_id=cluster_id, hour__gte=start, hour__lt=end, samples__gt=0)
    for k, hour, sm, n in hours.values_list(key, "hour", "sm_sum", "sm_samples").iterator():
        if k in row_of:
            cell = out[(row_of[k], int((hour - t0) / width))]
            cell[0] += sm or 0.0
            cell[1] += n or 0
    return {k: (v[0], v[1]) for k, v in out.items()}
