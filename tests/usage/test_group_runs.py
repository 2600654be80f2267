"""Where a group of small batches is cut into runs: each run is written as one batch, which must leave what its
batches written alone in turn leave (governance/usage/groups.py)."""

from datetime import UTC, datetime, timedelta

from collectors.records import decode_batch
from governance.usage.groups import gpus_merged, runs_planned
from governance.usage.prepared import GpuFacts, Header, prepare
from tests.factories import batch_body, job_record

T0 = datetime(2026, 11, 3, 9, tzinfo=UTC)
GRACE = timedelta(hours=24)


def gpu(uuid: str, node: str, first: timedelta, last: timedelta | None = None, index: int = 0) -> GpuFacts:
    return GpuFacts("c1", uuid, node, index, "H100", 81559.0, 0, "", T0 + first, T0 + (last or first))


def header(*gpus: GpuFacts, jobs: int = 0) -> Header:
    records = prepare(decode_batch(batch_body([job_record(job_id=str(n)) for n in range(jobs)]))).header.jobs
    return Header(jobs=records, gpus=list(gpus), job_keys=[], samples=len(gpus))


def minutes(n: int) -> timedelta:
    return timedelta(minutes=n)


def test_node_agents_intervals_in_order_are_one_run():
    headers = [header(gpu(f"G{n}", f"n{n}", minutes(10 * s))) for s in range(5) for n in range(3)]

    assert runs_planned(headers, {}, GRACE) == [range(15)]


def test_a_batch_with_job_records_starts_a_run_so_the_samples_before_it_are_folded():
    headers = [header(gpu("G0", "n0", minutes(0))), header(jobs=2), header(gpu("G0", "n0", minutes(10)))]

    assert runs_planned(headers, {}, GRACE) == [range(1), range(1, 3)]


def test_a_gpu_moved_by_a_later_sample_starts_a_run_and_an_older_one_from_another_node_does_not():
    moved = [
        header(gpu("G0", "n0", minutes(0))),
        header(gpu("G0", "n1", minutes(10))),
        header(gpu("G0", "n1", minutes(20))),
    ]
    late = [header(gpu("G0", "n0", minutes(10), minutes(20))), header(gpu("G0", "n1", minutes(12), minutes(15)))]

    assert runs_planned(moved, {}, GRACE) == [range(1), range(1, 3)]
    # An earlier sample does not move a GPU (its facts give way to the later one's): it is summed under n0 either way.
    assert runs_planned(late, {}, GRACE) == [range(2)]


def test_a_gpu_the_database_holds_elsewhere_is_judged_from_there():
    stored = {("c1", "G0"): ("n9", T0 + minutes(30))}  # a later sample put it on n9 already
    headers = [header(gpu("G0", "n0", minutes(0))), header(gpu("G0", "n0", minutes(40)))]

    # The first batch is older than the stored sample: summed under n9; the second moves it to n0.
    assert runs_planned(headers, stored, GRACE) == [range(1), range(1, 2)]


def test_a_silence_past_the_grace_or_a_sample_before_the_runs_first_starts_a_run():
    silent = [header(gpu("G0", "n0", minutes(0))), header(gpu("G0", "n0", GRACE + minutes(1)))]
    within = [header(gpu("G0", "n0", minutes(0))), header(gpu("G0", "n0", GRACE))]
    earlier = [header(gpu("G0", "n0", minutes(10))), header(gpu("G0", "n0", minutes(0)))]

    assert runs_planned(silent, {}, GRACE) == [range(1), range(1, 2)]
    assert runs_planned(within, {}, GRACE) == [range(2)]
    assert runs_planned(earlier, {}, GRACE) == [range(1), range(1, 2)]


def test_merged_gpus_take_the_span_of_all_their_samples_and_the_facts_of_the_latest():
    a = gpu("G0", "n0", minutes(10), minutes(20), index=0)
    b = gpu("G0", "n1", minutes(0), minutes(30), index=3)
    c = gpu("G1", "n0", minutes(5))

    merged = {g.uuid: g for g in gpus_merged([header(a, c), header(b)])}

    assert (merged["G0"].node, merged["G0"].index) == ("n1", 3)
    assert (merged["G0"].first_seen, merged["G0"].last_seen) == (T0, T0 + minutes(30))
    assert merged["G1"] == c
