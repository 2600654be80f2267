import json
from datetime import UTC, datetime

import pytest

from collectors import slurm
from collectors.records import JobRecord, SampleRecord
from tests.collectors.conftest import fixture_dir

SQUEUE = "slurmweb__slurmrestd-25.05-v0.0.43__slurm-job-gpus-multi-nodes.json"
SACCT = "slurmweb__slurmrestd-25.05-v0.0.43__slurmdb-job-gpus-multi-nodes.json"
NOW = datetime(2026, 11, 3, 9, 15, tzinfo=UTC)


def read(name: str) -> str:
    return (fixture_dir("slurm") / name).read_text()


def test_squeue_json_gives_a_running_job_with_its_gpus_from_the_gres():
    (job,) = slurm.parse(read(SQUEUE))

    assert (job.cluster, job.job_id, job.user, job.project, job.state) == ("hpc", "4746", "jbeck", "biology", "running")
    assert job.gpus == 8  # gpu:h100:4 on each of two nodes
    assert job.start_time == datetime.fromtimestamp(1762789125, UTC) and job.end_time is None  # end_time is its limit
    # squeue's end of a running job is when Slurm ends it: its time limit (1 minute here), a label for remediation
    assert job.labels == {"partition": "gpu", "qos": "normal", "name": "wrap", "time_limit_at": "2025-11-10T15:39:45Z"}


def test_sacct_json_without_gres_gpu_in_tres_reports_the_count_as_unknown_and_squeue_completes_it():
    accounted = slurm.parse(read(SACCT))
    (job,) = slurm.merge(accounted, slurm.parse(read(SQUEUE)))

    assert accounted[0].gpus is None  # that cluster does not account gres/gpu: unknown, never 0
    assert (job.job_id, job.gpus, job.project) == ("4746", 8, "biology")


def test_a_count_sacct_knows_fills_in_for_squeue_not_knowing_it():
    queued = json.loads(read(SQUEUE))
    for field in ("gres_detail", "tres_per_job"):
        queued["jobs"][0].pop(field)
    accounted = json.loads(read(SACCT))
    accounted["jobs"][0]["tres"]["allocated"].append({"type": "gres", "name": "gpu", "id": 1001, "count": 8})

    (job,) = slurm.merge(slurm.parse(json.dumps(accounted)), slurm.parse(json.dumps(queued)))

    assert (job.gpus, job.state) == (8, "running")


def test_only_slurm_job_ids_of_the_samples_are_asked_for_not_pods():
    asked = []
    jobs = slurm.SlurmJobs(cluster="c1", read=lambda ids, *, cluster: asked.append(ids) or [], clock=lambda: 0.0)
    samples = [
        SampleRecord(cluster="c1", node="n", gpu_uuid=f"GPU-{i}", gpu_index=i, gpu_model="m", ts=NOW, job_id=job)
        for i, job in enumerate(["4746", "4747_3", "ns/pod", None])
    ]

    jobs.describe(samples, NOW)

    assert asked == [["4746", "4747_3"]]


def test_a_finished_job_in_sacct_carries_its_end_and_state():
    data = json.loads(read(SACCT))
    job = data["jobs"][0]
    job["state"]["current"] = ["TIMEOUT"]
    job["time"]["end"] = 1762789185
    job["tres"]["allocated"].append({"type": "gres", "name": "gpu", "id": 1001, "count": 4})

    (record,) = slurm.parse(json.dumps(data))

    assert (record.state, record.end_time, record.gpus) == ("timeout", datetime.fromtimestamp(1762789185, UTC), 4)


def test_slurm_errors_in_the_json_are_raised_not_ignored():
    with pytest.raises(slurm.SlurmError, match="Invalid job id"):
        slurm.parse(json.dumps({"jobs": [], "errors": [{"description": "Invalid job id specified"}]}))


def test_job_records_are_asked_for_the_jobs_seen_and_a_finished_one_is_then_forgotten():
    asked = []

    start, end = datetime(2026, 11, 3, 9, tzinfo=UTC), datetime(2026, 11, 3, 10, tzinfo=UTC)

    def record(job_id: str, cluster: str) -> JobRecord:
        done = job_id == "2"
        return JobRecord(
            cluster=cluster, job_id=job_id, user="u", project="p", gpus=1, submit_time=start, start_time=start,
            end_time=end if done else None, state="completed" if done else "running",
        )  # fmt: skip

    def fake_read(ids, *, cluster):
        asked.append(ids)
        return [record(i, cluster) for i in ids]

    jobs = slurm.SlurmJobs(cluster="c1", every=300, read=fake_read, clock=lambda: 0.0)

    assert [r.job_id for r in jobs({"1", "2"})] == ["1", "2"]
    assert jobs({"1"}) == []  # nothing new, not yet time
    assert jobs({"1", "3"}) and asked[-1] == ["1", "3"]


def test_a_job_sacct_has_seen_end_has_ended_though_squeue_still_shows_it_completing():
    # Real Slurm 22.05: a job stopped at its time limit stays COMPLETING in squeue for seconds after sacct's TIMEOUT.
    queued = json.loads(read(SQUEUE))
    queued["jobs"][0]["job_state"] = ["COMPLETING"]
    accounted = json.loads(read(SACCT))
    accounted["jobs"][0]["state"]["current"] = ["TIMEOUT"]
    accounted["jobs"][0]["time"]["end"] = 1762789185

    (job,) = slurm.merge(slurm.parse(json.dumps(accounted)), slurm.parse(json.dumps(queued)))

    assert (job.state, job.end_time, job.gpus) == ("timeout", datetime.fromtimestamp(1762789185, UTC), 8)


def _run(state: str, submitted: int, started: int, ended: int) -> dict:
    """One sacct record of job 4746 (its time fields as `sacct --json --duplicates` prints them per run)."""
    job = json.loads(read(SACCT))["jobs"][0]
    job["state"] = {"current": [state], "reason": "None"}
    job["time"].update(submission=submitted, start=started, end=ended, elapsed=max(ended - started, 0))
    return job


def test_sacct_duplicates_of_a_requeued_job_give_one_record_with_each_run():
    # As Slurm 22.05 printed it: the first run REQUEUED (3 s), then the job submitted anew and running again
    text = json.dumps({"jobs": [_run("REQUEUED", 1796432443, 1796432445, 1796432448),
                                _run("RUNNING", 1796432451, 1796432451, 0)]})  # fmt: skip

    (job,) = slurm.parse(text)

    at = lambda s: datetime.fromtimestamp(s, UTC)  # noqa: E731
    assert (job.state, job.start_time, job.end_time) == ("running", at(1796432451), None)
    assert [(r.start, r.end) for r in job.runs] == [(at(1796432445), at(1796432448)), (at(1796432451), None)]
    assert job.submit_time == at(1796432443)  # the first run started before the submit time Slurm prints now


def test_a_requeued_job_squeue_shows_waiting_keeps_the_runs_sacct_accounted():
    accounted = slurm.parse(json.dumps({"jobs": [_run("REQUEUED", 100, 110, 170), _run("PENDING", 175, 0, 0)]}))
    queued = json.loads(read(SQUEUE))
    queued["jobs"][0]["job_state"] = ["PENDING"]

    (job,) = slurm.merge(accounted, slurm.parse(json.dumps(queued)))

    assert (job.state, job.start_time) == ("pending", None)
    assert [(r.start.timestamp(), r.end.timestamp()) for r in job.runs] == [(110, 170)]
