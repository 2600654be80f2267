import json

import pytest

from collectors.records import BatchInvalid, JobRecord, SampleRecord, decode_batch
from tests.factories import batch_body, job_record, sample_record


def test_it_decodes_the_design_example():
    batch = decode_batch(batch_body([job_record(gpus=8), sample_record()]))

    job, sample = batch.records
    assert isinstance(job, JobRecord) and job.gpus == 8 and job.labels == {"kind": "training"}
    assert isinstance(sample, SampleRecord) and sample.job_cpu_numa_nodes == [0] and sample.sm_util == 87.5


@pytest.mark.parametrize(
    ("override", "field", "reason"),
    [
        ({"sm_util": 101}, "sm_util", "<= 100"),
        ({"ts": "2026-11-03T09:15:00"}, "ts", "timezone"),
        ({"mem_used_mib": 90000}, "mem_used_mib", "larger than mem_total_mib"),
        ({"colour": "red"}, "colour", "unknown field"),
        ({"gpu_index": -1}, "gpu_index", ">= 0"),
    ],
)
def test_a_bad_sample_is_reported_with_its_index_field_and_reason(override, field, reason):
    with pytest.raises(BatchInvalid) as caught:
        decode_batch(batch_body([job_record(), sample_record(**override)]))

    (error,) = caught.value.errors
    assert (error.index, error.field) == (1, field)
    assert reason in error.reason


def test_a_job_that_ends_before_it_starts_is_refused():
    with pytest.raises(BatchInvalid) as caught:
        decode_batch(batch_body([job_record(end_time="2026-11-03T09:00:00Z")]))

    assert (caught.value.errors[0].field, caught.value.errors[0].reason) == ("end_time", "is before start_time")


def test_an_unknown_record_kind_is_refused():
    with pytest.raises(BatchInvalid) as caught:
        decode_batch(batch_body([{"kind": "invoice"}]))

    assert caught.value.errors[0].index == 0


def test_a_missing_batch_id_is_reported_on_the_envelope():
    with pytest.raises(BatchInvalid) as caught:
        decode_batch(json.dumps({"collector": "x", "records": []}).encode())

    assert (caught.value.errors[0].index, caught.value.errors[0].field) == (None, "batch_id")
