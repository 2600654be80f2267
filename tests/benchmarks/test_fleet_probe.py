"""The fleet probe's CPU readings: the cores each part kept busy while a page was read."""

from benchmarks.fleet_probe import CLOCK_TICKS, CpuShare


def test_the_cores_a_part_kept_busy_are_read_between_the_readings_that_span_a_view():
    cpu = CpuShare(timeline=[(10.0, {"machine": 0, "postgres": 0}), (11.0, {"machine": CLOCK_TICKS, "postgres": 0}),
                             (13.0, {"machine": 5 * CLOCK_TICKS, "postgres": 2 * CLOCK_TICKS})])  # fmt: skip

    assert cpu.cores_during(10.2, 10.8) == {"machine": 1.0, "postgres": 0.0}
    assert cpu.cores_during(10.5, 12.0) == {"machine": 5 / 3, "postgres": 2 / 3}  # from 10 s to 13 s
    assert cpu.cores_during(9.0, 10.5) == {} and cpu.cores_during(12.5, 14.0) == {}  # not spanned
