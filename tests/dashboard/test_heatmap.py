import pytest
import time_machine

pytestmark = pytest.mark.django_db


def heatmap(response) -> dict:
    return response.context["charts"][0].figure["data"][0]


def test_the_heatmap_has_a_row_per_gpu_so_idle_gpus_stand_out(client, cast, usage):
    client.force_login(cast.alice)

    trace = heatmap(client.get("/cluster/", {"start": "2026-11-03", "end": "2026-11-03"}))

    assert [y.split(" · ")[0] for y in trace["y"]] == ["gpu-017:0", "gpu-017:1", "gpu-017:2", "gpu-017:3"]
    assert len(trace["x"]) == 24 and trace["x"][10] == "2026-11-03 10:30"  # the middle of the hour it covers
    assert [row[10] for row in trace["z"]] == [90.0, 0.0, 0.0, 0.0]
    assert [row[11] for row in trace["z"]] == [90.0, 0.0, 60.0, 0.0]
    assert trace["z"][0][9] is None  # before any reading: a gap, not an idle GPU


def test_a_long_range_is_downsampled_to_the_cell_budget(client, cast, usage, settings):
    client.force_login(cast.admin)

    trace = heatmap(client.get("/cluster/", {"start": "2026-01-01", "end": "2026-12-31"}))

    assert len(trace["x"]) * len(trace["y"]) <= 60_000
    assert any(v is not None for row in trace["z"] for v in row)


def test_the_heatmap_picks_the_first_cluster_when_none_is_asked_for(client, cast, usage):
    client.force_login(cast.admin)

    response = client.get("/cluster/", {"month": "2026-11"})

    assert response.context["cluster"].name == "c1"
    assert b'<option value="c1" selected>' in response.content


def test_without_any_cluster_the_heatmap_says_how_to_get_data(client, cast):
    client.force_login(cast.admin)

    response = client.get("/cluster/")

    assert b"seed_demo" in response.content and b"data-figure" not in response.content


def test_heatmap_rows_name_the_job_holding_each_gpu_only_where_the_viewer_may_see_it(client, cast, usage):
    client.force_login(cast.admin)
    admin_rows = heatmap(client.get("/cluster/", {"start": "2026-11-03", "end": "2026-11-03"}))["y"]
    client.force_login(cast.vision_lead)
    lead_rows = heatmap(client.get("/cluster/", {"start": "2026-11-03", "end": "2026-11-03"}))["y"]

    assert any("· job " in row and "(NLP)" in row for row in admin_rows)
    assert not any("(NLP)" in row for row in lead_rows)
    assert any("a job you may not see" in row for row in lead_rows)


def test_a_relative_range_ends_now_and_refreshes(client, cast, usage):
    client.force_login(cast.admin)
    with time_machine.travel("2026-11-03T12:30:00Z"):
        response = client.get("/cluster/", {"range": "24h"})

    f = response.context["f"]
    assert (f.start.isoformat(), f.end.isoformat()) == ("2026-11-02T13:00:00+00:00", "2026-11-03T13:00:00+00:00")
    assert b'data-refresh-seconds="300"' in response.content and b"last 24 h" in response.content
