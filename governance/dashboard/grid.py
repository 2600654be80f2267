"""The cells the cluster heatmap draws, aggregated in SQL: a row per GPU while the cluster's GPUs fit the page,
else a row per node, else per run of consecutive nodes (so a row is never thinner than a pixel); columns of
hours (days beyond two months, or where a grid of nodes would read more node-hours than `HOURLY_READ`), widened
so the grid keeps to its cell budget. A node's own GPUs are one drill-down away (`node=`).

Rows of GPUs read the GPU-hours (at most `MAX_ROWS` GPUs, or one node's); rows of nodes read the node rollups
ingest keeps (`NodeHour`, and `NodeDay` for whole days of daily columns), so the rows read grow with the cells
drawn, not with the fleet. The database returns one row per cell, never one per GPU-hour."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db.models import Count

from governance.fleet.models import Gpu, Node
from governance.lib.replica import reading_connection
from governance.usage.models import GpuHour, NodeDay, NodeHour

HOURLY_UP_TO = timedelta(days=62)
MAX_ROWS = 256  # 14 px a row and 4,000 px a chart at most
MAX_CELLS = 60_000
# Node-hours a grid of nodes may read for hourly columns (a month of 320 nodes); beyond, its columns are days.
HOURLY_READ = 4 * MAX_CELLS

CELLS = """
SELECT r.row, floor(extract(epoch FROM h.hour - %(t0)s) / %(width)s)::int AS col, sum(h.sm_sum), sum(h.sm_samples)
FROM usage_gpuhour h JOIN fleet_gpu g ON g.id = h.gpu_id
JOIN unnest(%(keys)s::int8[], %(rows)s::int[]) AS r(key, row) ON r.key = g.id
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
    rows = _rows(cluster_id, node, max_rows)
    hours = math.ceil((end - bucket_floor(start, False)) / timedelta(hours=1))
    daily = end - start > HOURLY_UP_TO or (rows.per != "gpu" and len(rows.keys) * hours > HOURLY_READ)
    step = timedelta(days=1) if daily else timedelta(hours=1)
    t0 = bucket_floor(start, daily)
    count = max(1, math.ceil((end - t0) / step))
    width = max(1, math.ceil(count / max(1, max_cells // max(1, len(rows.labels)))))
    columns = [t0 + step * width * i for i in range(math.ceil(count / width))]
    cells = (
        _gpu_cells(cluster_id, start, end, t0, step * width, rows)
        if rows.per == "gpu"
        else _node_cells(start, end, t0, step * width, rows, daily)
    )
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


def _gpu_cells(cluster_id: int, start: datetime, end: datetime, t0: datetime, width: timedelta,
           rows: _Rows) -> dict[tuple[int, int], tuple[float, int]]:  # fmt: skip
    db = reading_connection(GpuHour)
    if db.vendor == "postgresql":
        params: dict = {"t0": t0, "width": width.total_seconds(), "keys": rows.keys, "rows": rows.index,
                  "cluster": cluster_id, "start": start, "end": end}  # fmt: skip
        with db.cursor() as cursor:
            cursor.execute(CELLS, params)
            return {(r, c): (sm or 0.0, n or 0) for r, c, sm, n in cursor.fetchall()}
    # The embedded default (SQLite, a demo's few GPUs): the same cells, summed here.
    row_of = dict(zip(rows.keys, rows.index, strict=True))
    out: dict[tuple[int, int], list] = defaultdict(lambda: [0.0, 0])
    hours = GpuHour.objects.filter(gpu__cluster_id=cluster_id, hour__gte=start, hour__lt=end, samples__gt=0)
    for k, hour, sm, n in hours.values_list("gpu_id", "hour", "sm_sum", "sm_samples").iterator():
        if k in row_of:
            cell = out[(row_of[k], int((hour - t0) / width))]
            cell[0] += sm or 0.0
            cell[1] += n or 0
    return {k: (v[0], v[1]) for k, v in out.items()}


def _spans(start: datetime, end: datetime, daily: bool) -> tuple[list[tuple[datetime, datetime]], tuple]:
    """([start, end) pieces read from the node-hours, the whole days [first, last) read from the node-days): the
    node-days where a day column holds whole days, the node-hours for the hourly columns and a range's part days."""
    first = bucket_floor(start, True)
    first = first if first == start else first + timedelta(days=1)
    last = bucket_floor(end, True)
    if not daily or first >= last:
        return [(start, end)], ()
    return [(a, b) for a, b in ((start, first), (last, end)) if a < b], (first.date(), last.date())


NODE_CELLS = """
WITH r(key, row) AS (SELECT * FROM unnest(%(keys)s::int8[], %(rows)s::int[])),
parts(lo, hi) AS (SELECT * FROM unnest(%(lo)s::timestamptz[], %(hi)s::timestamptz[])),
cells(node_id, at, sm_sum, sm_samples) AS (
    SELECT n.node_id, n.hour, n.sm_sum, n.sm_samples FROM usage_nodehour n JOIN parts p ON n.hour >= p.lo
    AND n.hour < p.hi WHERE n.node_id = ANY(%(keys)s::int8[])
    UNION ALL
    SELECT d.node_id, d.day::timestamp AT TIME ZONE 'UTC', d.sm_sum, d.sm_samples FROM usage_nodeday d
    WHERE d.node_id = ANY(%(keys)s::int8[]) AND d.day >= %(first)s AND d.day < %(last)s
)
SELECT r.row, floor(extract(epoch FROM c.at - %(t0)s) / %(width)s)::int, sum(c.sm_sum), sum(c.sm_samples)::int8
FROM cells c JOIN r ON r.key = c.node_id
GROUP BY 1, 2
"""


def _node_cells(start: datetime, end: datetime, t0: datetime, width: timedelta, rows: _Rows,
                daily: bool) -> dict[tuple[int, int], tuple[float, int]]:  # fmt: skip
    hourly, days = _spans(start, end, daily)
    first, last = days or (start.date(), start.date())
    db = reading_connection(NodeHour)
    if db.vendor == "postgresql":
        params: dict = {"keys": rows.keys, "rows": rows.index, "lo": [a for a, _ in hourly],
                        "hi": [b for _, b in hourly], "first": first, "last": last, "t0": t0,
                        "width": width.total_seconds()}  # fmt: skip
        with db.cursor() as cursor:
            cursor.execute(NODE_CELLS, params)
            return {(r, c): (sm or 0.0, n or 0) for r, c, sm, n in cursor.fetchall()}
    row_of = dict(zip(rows.keys, rows.index, strict=True))
    out: dict[tuple[int, int], list] = defaultdict(lambda: [0.0, 0])
    found: list[tuple[int, datetime, float, int]] = []
    for a, b in hourly:
        found += NodeHour.objects.filter(node_id__in=rows.keys, hour__gte=a, hour__lt=b).values_list(
            "node_id", "hour", "sm_sum", "sm_samples"
        )
    for k, day, sm, n in NodeDay.objects.filter(node_id__in=rows.keys, day__gte=first, day__lt=last).values_list(
        "node_id", "day", "sm_sum", "sm_samples"
    ):
        found.append((k, datetime(day.year, day.month, day.day, tzinfo=UTC), sm, n))
    for k, at, sm, n in found:
        cell = out[(row_of[k], int((at - t0) / width))]
        cell[0] += sm or 0.0
        cell[1] += n or 0
    return {k: (v[0], v[1]) for k, v in out.items()}
