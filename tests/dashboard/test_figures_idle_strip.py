"""The idle strip of a job page: pure data in, figure out."""

from datetime import UTC, datetime, timedelta

from governance.dashboard.figures.jobs import GpuHourPoint, idle_strip

T0 = datetime(2026, 11, 3, 9, tzinfo=UTC)


def point(gpu: str, i: int, sm: float | None) -> GpuHourPoint:
    return GpuHourPoint(gpu=gpu, hour=T0 + timedelta(hours=i), sm_percent=sm, mem_gib=None, power_w=None)


def test_it_marks_each_gpus_idle_hours_and_leaves_unknown_hours_blank():
    points = [point("n1:0", 0, 40.0), point("n1:0", 1, 0.2), point("n1:0", 2, None), point("n1:1", 0, 0.0)]

    figure = idle_strip(points, 1.0)

    strip = figure["data"][0]
    assert strip["y"] == ["n1:0", "n1:1"]
    assert strip["x"] == [(T0 + timedelta(hours=i)).isoformat() for i in range(3)]
    assert strip["z"] == [[0, 1, None], [1, None, None]]  # busy, idle, unknown; the second GPU has one hour
    assert "under 1%" in figure["layout"]["title"]["text"]


def test_a_job_without_samples_draws_an_empty_strip():
    assert idle_strip([], 1.0)["data"][0]["z"] == []
