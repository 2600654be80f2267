import pytest

from tests.factories import at, ingest, series

pytestmark = pytest.mark.django_db
DAY = {"start": "2026-11-03", "end": "2026-11-03"}


def heatmap(response) -> dict:
    return response.context["charts"][0].figure["data"][0]


@pytest.fixture
def two_nodes(usage):
    """c1's four GPUs on gpu-017 (the dashboard's usage) and one more on gpu-018, busy at 30 % from 10:00."""
    ingest(series(start=at("2026-11-03T10:00:00Z"), minutes=120, every_s=600, job_id=None, node="gpu-018",
                  gpu_uuid="GPU-018-0", gpu_index=0, sm_util=30.0))  # fmt: skip


def test_a_cluster_with_more_gpus_than_rows_shows_a_row_per_node_at_its_gpus_mean(client, cast, two_nodes, settings,
                                                                                   monkeypatch):  # fmt: skip
    monkeypatch.setattr("governance.dashboard.grid.MAX_ROWS", 2)
    client.force_login(cast.admin)

    response = client.get("/cluster/", DAY)
    trace = heatmap(response)

    assert trace["y"] == ["gpu-017 (4 GPUs)", "gpu-018 (1 GPUs)"]
    # 10:00: GPU 0 at 90 %, the other three idle; 11:00: GPU 2 works at 60 % too.
    assert [row[10] for row in trace["z"]] == [22.5, 30.0]
    assert [row[11] for row in trace["z"]] == [37.5, 30.0]
    assert trace["z"][1][12] is None  # gpu-018 stopped reporting at noon
    assert b'id="heatmap-node"' in response.content and b'<option value="gpu-018">' in response.content


def test_with_more_nodes_than_rows_a_row_is_a_run_of_consecutive_nodes(client, cast, two_nodes, monkeypatch):
    monkeypatch.setattr("governance.dashboard.grid.MAX_ROWS", 1)
    client.force_login(cast.admin)

    trace = heatmap(client.get("/cluster/", DAY))

    assert trace["y"] == ["gpu-017 … gpu-018 (2 nodes)"]
    assert trace["z"][0][10] == (90.0 + 30.0) / 5  # the five GPUs' samples, weighted alike


def test_a_node_drills_down_to_its_own_gpus_and_who_held_them(client, cast, two_nodes, monkeypatch):
    monkeypatch.setattr("governance.dashboard.grid.MAX_ROWS", 2)
    client.force_login(cast.admin)

    response = client.get("/cluster/", {**DAY, "node": "gpu-017"})
    trace = heatmap(response)

    assert [y.split(" · ")[0] for y in trace["y"]] == ["gpu-017:0", "gpu-017:1", "gpu-017:2", "gpu-017:3"]
    assert [row[11] for row in trace["z"]] == [90.0, 0.0, 60.0, 0.0]
    assert any("· job " in y for y in trace["y"])
    assert b'id="heatmap-all-nodes"' in response.content


def test_a_month_of_a_big_cluster_keeps_to_the_cell_budget_with_columns_of_whole_hours(client, cast, two_nodes,
                                                                                      monkeypatch):  # fmt: skip
    monkeypatch.setattr("governance.dashboard.charts.MAX_HEATMAP_CELLS", 200)
    client.force_login(cast.admin)

    trace = heatmap(client.get("/cluster/", {"month": "2026-11"}))

    # 720 hours of 5 rows in 200 cells: columns of 18 hours, labelled by their middle.
    assert len(trace["y"]) == 5 and len(trace["x"]) == 40
    assert trace["x"][:2] == ["2026-11-01 09:00", "2026-11-02 03:00"]
    third = [row[2] for row in trace["z"]]  # 2026-11-02 12:00 to 2026-11-03 06:00: nothing reported
    assert third == [None] * 5
    assert trace["z"][0][3] == 90.0  # GPU 0 at 90 % for the four hours of the column it reported in
