from datetime import UTC, datetime

from governance.lib.run_spans import held_within, runs_merge, runs_of, runs_stored


def at(hour: int) -> datetime:
    return datetime(2026, 11, 10, hour, tzinfo=UTC)


def test_a_known_end_of_a_run_is_never_erased_by_a_later_record_that_does_not_know_it():
    assert runs_merge([(at(10), at(12))], [(at(10), None)], end=None) == [(at(10), at(12))]


def test_a_run_still_open_when_the_next_one_starts_ended_by_then():
    assert runs_merge([(at(10), None)], [(at(14), None)], end=None) == [(at(10), at(14)), (at(14), None)]


def test_runs_never_overlap_and_nothing_is_held_after_the_job_ended():
    merged = runs_merge([(at(10), at(15))], [(at(14), None), (at(18), None)], end=at(17))

    assert merged == [(at(10), at(14)), (at(14), at(17))]


def test_a_job_that_ran_once_stores_nothing_and_reads_back_as_its_one_run():
    assert runs_stored([(at(10), at(12))], at(10), at(12)) == []
    assert runs_of([], at(10), at(12)) == [(at(10), at(12))]
    stored = runs_stored([(at(10), at(12))], at(10), None)  # requeued, waiting: it holds nothing now
    assert runs_of(stored, at(10), None) == [(at(10), at(12))]


def test_only_the_runs_of_a_window_are_held_an_open_run_up_to_its_end():
    runs = [(at(10), at(12)), (at(14), None)]

    assert held_within(runs, at(11), at(15)) == [(at(11), at(12)), (at(14), at(15))]
    assert held_within(runs, at(12), at(14)) == []
    assert held_within(None, at(12), at(14)) == [(at(12), at(14))]
