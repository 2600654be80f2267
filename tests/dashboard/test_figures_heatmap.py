import json

from governance.dashboard.figures.heatmap import gpu_heatmap


def test_each_gpu_is_a_row_and_each_hour_a_column():
    figure = gpu_heatmap(["n1:0", "n1:1"], ["2026-11-03 10:00", "2026-11-03 11:00"], [[90.0, 88.04], [0.0, None]])

    trace = figure["data"][0]
    assert trace["type"] == "heatmap" and trace["y"] == ["n1:0", "n1:1"]
    assert trace["z"] == [[90.0, 88.0], [0.0, None]]
    assert trace["zmin"] == 0 and trace["zmax"] == 100


def test_gaps_are_not_hovered_as_zero_utilisation():
    trace = gpu_heatmap(["n1:0"], ["t"], [[None]])["data"][0]

    assert trace["hoverongaps"] is False


def test_the_chart_grows_with_the_number_of_gpus_within_bounds():
    small = gpu_heatmap(["n:0"], ["t"], [[1.0]])["layout"]["height"]
    large = gpu_heatmap([f"n:{i}" for i in range(256)], ["t"], [[1.0]] * 256)["layout"]["height"]
    huge = gpu_heatmap([f"n:{i}" for i in range(5000)], ["t"], [[1.0]] * 5000)["layout"]["height"]

    assert small == 420 and small < large <= huge == 4000


def test_the_figure_is_plain_json():
    figure = gpu_heatmap(["n:0"], ["t"], [[1.0]])

    assert json.loads(json.dumps(figure)) == figure
