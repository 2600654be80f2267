"""The node rollups the heatmap reads (node-hour, node-day) equal the GPU-hours they sum after ingest, re-sent
batches and readings sent twice included, and the heatmap of nodes reads them to the same cells."""

from datetime import UTC, datetime, timedelta

import pytest

from governance.dashboard.grid import _gpu_cells, _node_cells, _Rows, _spans
from governance.fleet.models import Gpu, Node
from governance.usage.models import GpuHour, NodeDay, NodeHour
from governance.usage.node_rollups import node_rollups_drift, node_rollups_rebuild
from tests.factories import at, ingest, series

pytestmark = pytest.mark.django_db


def two_nodes_two_days() -> list[dict]:
    """Two nodes, two GPUs each, 22:00 one day to 02:00 the next, SM by GPU and minute (some unknown)."""
    records = []
    for node in ("gpu-101", "gpu-102"):
        for index in (0, 1):
            records += series(
                start=at("2026-11-03T22:00:00Z"), minutes=240, every_s=900, job_id=None, node=node,
                gpu_uuid=f"GPU-{node}-{index}", gpu_index=index,
                sm_util=lambda s, i=index: None if s % 3600 == 0 and i else float((s // 60 + 7 * i) % 100),
            )  # fmt: skip
    return records


def test_the_node_rollups_equal_the_gpu_hours_after_ingest():
    ingest(two_nodes_two_days())

    assert node_rollups_drift() == {"usage_nodehour": [], "usage_nodeday": []}
    assert NodeHour.objects.count() == 2 * 4 and NodeDay.objects.count() == 2 * 2
    assert sum(NodeDay.objects.values_list("samples", flat=True)) == sum(
        GpuHour.objects.values_list("samples", flat=True)
    )


def test_a_resent_batch_and_readings_sent_twice_count_once():
    records = two_nodes_two_days()
    batch = ingest(records)
    before = list(NodeHour.objects.order_by("node_id", "hour").values_list("samples", "sm_samples", "sm_sum"))

    ingest(records, batch_id=str(batch))  # the same batch again
    ingest(records[:10] + records[-10:])  # its readings in a new batch
    ingest(records[::2] + records[::2])  # twice in one batch

    assert list(NodeHour.objects.order_by("node_id", "hour").values_list("samples", "sm_samples", "sm_sum")) == before
    assert node_rollups_drift() == {"usage_nodehour": [], "usage_nodeday": []}


def test_later_readings_of_an_hour_fold_into_its_node_hour_and_day():
    records = two_nodes_two_days()
    ingest(records[: len(records) // 2])
    ingest(records[len(records) // 2 :])

    assert node_rollups_drift() == {"usage_nodehour": [], "usage_nodeday": []}


def test_a_rebuild_sums_what_ingest_folded():
    ingest(two_nodes_two_days())
    folded = sorted(NodeDay.objects.values_list("node_id", "day", "samples", "sm_samples"))

    node_rollups_rebuild()

    assert sorted(NodeDay.objects.values_list("node_id", "day", "samples", "sm_samples")) == folded


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (datetime(2026, 11, 3, 23, tzinfo=UTC), datetime(2026, 11, 4, 1, tzinfo=UTC)),  # part days only
        (datetime(2026, 11, 3, tzinfo=UTC), datetime(2026, 11, 5, tzinfo=UTC)),  # whole days only
        (datetime(2026, 11, 3, 23, tzinfo=UTC), datetime(2026, 11, 5, tzinfo=UTC)),  # a part day, a whole day
    ],
)
def test_daily_cells_of_nodes_read_from_the_rollups_equal_those_summed_from_the_gpu_hours(start, end):
    ingest(two_nodes_two_days())
    gpus = sorted(Gpu.objects.values_list("node__name", "pk", "node_id"))
    nodes = sorted(Node.objects.values_list("name", "pk"))
    by_gpu = _Rows("gpu", [pk for _, pk, _ in gpus], [[p for _, p in nodes].index(n) for *_, n in gpus], [], [])
    by_node = _Rows("node", [pk for _, pk in nodes], list(range(len(nodes))), [], [])
    t0, width = datetime(2026, 11, 3, tzinfo=UTC), timedelta(days=1)
    cluster = Gpu.objects.first().cluster_id

    from_gpus = _gpu_cells(cluster, start, end, t0, width, by_gpu)
    from_nodes = _node_cells(start, end, t0, width, by_node, daily=True)

    assert from_nodes.keys() == from_gpus.keys() and from_nodes
    for cell, (sm, n) in from_gpus.items():
        assert from_nodes[cell][1] == n and from_nodes[cell][0] == pytest.approx(sm)


def test_a_range_splits_into_node_hours_for_part_days_and_node_days_for_whole_ones():
    start, end = datetime(2026, 11, 3, 23, tzinfo=UTC), datetime(2026, 11, 6, 5, tzinfo=UTC)

    hourly, days = _spans(start, end, daily=True)

    assert hourly == [(start, datetime(2026, 11, 4, tzinfo=UTC)), (datetime(2026, 11, 6, tzinfo=UTC), end)]
    assert days == (datetime(2026, 11, 4).date(), datetime(2026, 11, 6).date())
    assert _spans(start, end, daily=False) == ([(start, end)], ())
