import pytest

from governance.lib.downsample import bucket_width, grid_mean_buckets, mean_buckets, ratio_buckets


def test_a_short_series_is_left_as_it_is():
    assert mean_buckets([1, 2, 3], [10.0, None, 30.0], 10) == ([1, 2, 3], [10.0, None, 30.0])


def test_a_long_series_becomes_at_most_the_points_asked_for():
    xs = list(range(10_000))
    out_x, out_y = mean_buckets(xs, [float(x) for x in xs], 2000)

    assert len(out_x) <= 2000
    assert out_x[:2] == [0, 5] and out_y[0] == 2.0


def test_a_bucket_without_readings_stays_a_gap():
    assert mean_buckets([0, 1, 2, 3], [None, None, 4.0, None], 2) == ([0, 2], [None, 4.0])


def test_ratios_are_summed_before_dividing_so_big_hours_weigh_more():
    _, ratio = ratio_buckets([0, 1], [1.0, 90.0], [10.0, 100.0], 1)

    assert ratio == [pytest.approx(91 / 110)]


def test_a_ratio_with_no_capacity_is_a_gap_not_a_zero():
    assert ratio_buckets([0, 1], [0.0, 0.0], [0.0, 0.0], 1) == ([0], [None])


def test_a_grid_is_cut_to_the_cell_budget_row_by_row():
    rows = [[float(i)] * 720 for i in range(256)]
    xs, grid = grid_mean_buckets(list(range(720)), rows, 60_000)

    assert len(xs) * len(grid) <= 60_000
    assert len(grid) == 256 and grid[7][0] == 7.0


def test_it_refuses_a_budget_of_nothing():
    with pytest.raises(ValueError, match="max_points"):
        bucket_width(10, 0)


def test_it_refuses_series_of_different_lengths():
    with pytest.raises(ValueError, match="same length"):
        mean_buckets([1, 2], [1.0], 5)
