"""The agent's Slurm reader (collectors/slurm.py) against a real Slurm 22.05: jobs submitted with sbatch, read through
squeue/sacct and slurmrestd (JWT), ingested through the real path and billed; the ledger agrees with sacct."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from decimal import Decimal

import msgspec
import pytest
from django.db.models import Sum

from collectors import slurm
from collectors.records import JobRecord
from governance.costs.models import Charge
from governance.usage.models import Job
from tests.costs.conftest import declare
from tests.factories import H100, ingest, rate
from tests.invariants import assert_billing_invariants
from tests.slurm.cluster import REST_VERSION, SlurmCluster, wait_for

TERMINAL = ("COMPLETED", "CANCELLED", "TIMEOUT", "FAILED")
HOUR = Decimal(3600)


@dataclass
class Submitted:
    """The jobs of one scenario by what happened to them (an array's tasks under its master's name)."""

    ids: dict[str, list[str]]

    @property
    def all(self) -> list[str]:
        return [job for jobs in self.ids.values() for job in jobs]


def sacct(cluster: SlurmCluster, ids: list[str]) -> list[dict]:
    return json.loads(cluster.cli(["sacct", "--json", f"--jobs={','.join(ids)}"]).stdout)["jobs"]


def sacct_ended(cluster: SlurmCluster, ids: list[str]) -> list[dict] | None:
    """sacct's records of these jobs once every one has ended there (slurmdbd lags slurmctld), else None."""
    jobs = sacct(cluster, ids)
    done = [j for j in jobs if j["state"]["current"] in TERMINAL and j["time"]["end"]]
    return jobs if len(done) == len(jobs) and {str(j["job_id"]) for j in jobs} >= set(ids) else None


def sacct_gpu_hours(job: dict) -> Decimal:
    """Slurm's own figure: elapsed seconds x the GPUs its accounting allocated, in hours."""
    gpus = sum(t["count"] for t in job["tres"]["allocated"] if t["type"] == "gres" and t["name"] == "gpu")
    return Decimal(job["time"]["elapsed"]) * gpus / HOUR


def billed(cluster: str) -> dict[str, Decimal]:
    rows = Charge.objects.filter(kind="usage", cluster_name=cluster).values("job_ref").annotate(h=Sum("gpu_hours"))
    return {r["job_ref"]: r["h"] for r in rows}


def as_ingested(records: list[JobRecord]) -> list[dict]:
    """The agent's job records as its batch carries them; the GPU model is what its samples name on these nodes."""
    return [{"kind": "job", **msgspec.to_builtins(msgspec.structs.replace(r, gpu_model=H100))} for r in records]


def array_tasks(cluster: SlurmCluster, master: str) -> list[str]:
    jobs = sacct(cluster, [master])
    return sorted(str(j["job_id"]) for j in jobs if str(j["job_id"]) == master or str(j["array"]["job_id"]) == master)


@pytest.fixture(scope="module")
def gres_jobs(slurm_gres: SlurmCluster) -> Submitted:
    """Every kind of ending at once on the GPU-accounting cluster (8 GPUs): over its time limit (Slurm enforces
    limits in whole minutes, checked every 30 s: the slowest, submitted first), completed, an array, cancelled while
    running, cancelled while pending (held)."""
    c = slurm_gres
    timeout = c.submit("sleep 300", gpus=1, name="over-limit", extra=["--time=1"])
    completed = c.submit("sleep 3", gpus=2, name="done")
    array = c.submit("sleep 2", gpus=1, name="sweep", extra=["--array=0-2"])
    running = c.submit("sleep 120", gpus=1, name="cancel-running")
    held = c.submit("sleep 5", gpus=1, name="cancel-pending", extra=["--hold"])
    c.wait_state(running, "RUNNING")
    time.sleep(1)
    c.cli(["scancel", running, held])
    tasks = wait_for("the array's tasks", lambda: len(array_tasks(c, array)) == 3 and array_tasks(c, array))
    return Submitted(
        {"timeout": [timeout], "completed": [completed], "array": tasks, "running": [running], "pending": [held]}
    )


@pytest.fixture(scope="module", autouse=True)
def _over_limit_clock_starts_first(gres_jobs: Submitted) -> None:
    """The over-limit job takes 60-90 s to be stopped: submitted before the first test, so the tests of the other
    cluster run while it does and the billing test (last) waits only for what is left."""


def priced_setup(cluster: str) -> None:
    rate(H100, "2.00")
    declare(8, H100, cluster=cluster)  # the collectors see no GPU here: the cluster's 2 nodes x 4 declared


def test_slurmrestd_with_a_jwt_gives_the_records_the_commands_give(slurm_gres, gres_jobs, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm_gres.conf))
    ended = [job for kind, jobs in gres_jobs.ids.items() if kind != "timeout" for job in jobs]
    wait_for("the jobs to end in sacct", lambda: sacct_ended(slurm_gres, ended), timeout=60)
    rest = slurm.SlurmRest(slurm_gres.rest_url, version=REST_VERSION, environ=slurm_gres.rest_env)

    def facts(records: list[JobRecord]) -> dict[str, tuple]:
        return {r.job_id: (r.cluster, r.project, r.user, r.gpus, r.state, r.start_time, r.end_time) for r in records}

    from_rest = facts(rest.jobs_read(ended))
    assert from_rest == facts(slurm.jobs_read(ended))
    assert from_rest[gres_jobs.ids["completed"][0]][3:5] == (2, "completed")


def test_slurmrestd_refuses_a_forged_token_and_the_reader_says_so(slurm_gres):
    forged = slurm_gres.token[:-4] + ("AAAA" if not slurm_gres.token.endswith("AAAA") else "BBBB")
    rest = slurm.SlurmRest(slurm_gres.rest_url, version=REST_VERSION, environ={"SLURM_JWT": forged, "USER": "root"})

    with pytest.raises(slurm.SlurmError, match="SLURM_JWT"):
        rest.jobs_read(["1"])


@pytest.mark.django_db
def test_without_gres_accounting_the_count_comes_from_squeue_while_running_and_is_never_lowered(
    slurm_plain, monkeypatch
):
    monkeypatch.setenv("SLURM_CONF", str(slurm_plain.conf))
    priced_setup(slurm_plain.name)
    job = slurm_plain.submit("sleep 3", gpus=2, name="plain")
    slurm_plain.wait_state(job, "RUNNING")

    (running,) = slurm.jobs_read([job], cluster=slurm_plain.name)
    rest = slurm.SlurmRest(slurm_plain.rest_url, version=REST_VERSION, environ=slurm_plain.rest_env)
    (running_by_rest,) = rest.jobs_read([job], cluster=slurm_plain.name)
    ingest(as_ingested([running]))
    (accounted,) = wait_for("the job to end in sacct", lambda: sacct_ended(slurm_plain, [job]), timeout=60)
    (ended,) = slurm.jobs_read([job], cluster=slurm_plain.name)
    ingest(as_ingested([ended]))

    assert not [t for t in accounted["tres"]["allocated"] if t["type"] == "gres"]  # sacct does not know the count
    assert (running.gpus, running.state, ended.gpus, ended.state) == (2, "running", None, "completed")
    assert (running_by_rest.gpus, running_by_rest.state) == (2, "running")
    assert Job.objects.get(cluster__name=slurm_plain.name, external_id=job).gpus == 2
    elapsed = Decimal(accounted["time"]["elapsed"])
    assert billed(slurm_plain.name)[job] == pytest.approx(elapsed * 2 / HOUR, abs=Decimal("0.00001"))
    assert_billing_invariants()


def test_a_requeued_job_goes_back_to_pending_without_an_end(slurm_plain, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm_plain.conf))
    job = slurm_plain.submit("sleep 30", gpus=1, name="requeued")
    slurm_plain.wait_state(job, "RUNNING")

    slurm_plain.cli(["scontrol", "requeue", job])
    slurm_plain.wait_state(job, "PENDING")
    (record,) = slurm.jobs_read([job], cluster=slurm_plain.name)
    slurm_plain.cli(["scancel", job])

    assert (record.state, record.end_time) == ("pending", None)


def runs_accounted(cluster: SlurmCluster, job: str, count: int) -> list[dict] | None:
    """sacct's records of each run of a requeued job (--duplicates) once `count` runs have ended there, else None."""
    runs = json.loads(cluster.cli(["sacct", "--json", "--duplicates", f"--jobs={job}"]).stdout)["jobs"]
    ended = [r for r in runs if r["time"]["end"] and r["state"]["current"] != "RUNNING"]
    return runs if len(ended) >= count else None


def read_when(cluster: SlurmCluster, job: str, ready) -> JobRecord:
    return wait_for("the agent's record", lambda: next(iter(
        [r for r in slurm.jobs_read([job], cluster=cluster.name) if ready(r)]), None), timeout=30)  # fmt: skip


@pytest.mark.django_db
def test_a_requeued_job_is_billed_for_its_runs_as_sacct_accounts_them_not_while_it_waits(slurm_gres, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm_gres.conf))
    priced_setup(slurm_gres.name)
    job = slurm_gres.submit("sleep 300", gpus=2, name="requeued-billed", extra=["--requeue"])
    try:
        slurm_gres.wait_state(job, "RUNNING")
        ingest(as_ingested(slurm.jobs_read([job], cluster=slurm_gres.name)))
        time.sleep(2)
        slurm_gres.cli(["scontrol", "requeue", job])
        waiting = read_when(slurm_gres, job, lambda r: r.state == "pending" and r.runs and r.runs[0].end)
        ingest(as_ingested([waiting]))
        (first,) = [r for r in wait_for("the first run in sacct", lambda: runs_accounted(slurm_gres, job, 1))
                    if r["state"]["current"] == "REQUEUED"]  # fmt: skip
        billed_waiting = billed(slurm_gres.name)[job]
        # Slurm holds a requeued job ~120 s (BeginTime) before it may run again: it may start now
        slurm_gres.cli(["scontrol", "update", f"JobId={job}", "StartTime=now"])
        slurm_gres.wait_state(job, "RUNNING")
        ingest(as_ingested([read_when(slurm_gres, job, lambda r: r.state == "running")]))
        time.sleep(2)
    finally:
        slurm_gres.cli(["scancel", job], check=False)
    runs = wait_for("both runs to end in sacct", lambda: runs_accounted(slurm_gres, job, 2), timeout=60)
    ended = read_when(slurm_gres, job, lambda r: r.end_time is not None)
    ingest(as_ingested([ended]))

    assert billed_waiting == pytest.approx(sacct_gpu_hours(first), abs=Decimal("0.00001"))
    assert [r["state"]["current"] for r in runs] == ["REQUEUED", "CANCELLED"]
    assert len(ended.runs) == 2
    expected = sum(sacct_gpu_hours(r) for r in runs)  # sacct's elapsed x GPUs, summed over the runs
    assert billed(slurm_gres.name)[job] == pytest.approx(expected, abs=Decimal("0.00001"))
    span = Decimal(runs[-1]["time"]["end"] - runs[0]["time"]["start"]) * 2 / HOUR
    assert expected < span  # the wait between the runs is not on the bill
    assert_billing_invariants()


@pytest.mark.django_db
def test_each_job_is_billed_the_gpu_hours_sacct_reports_elapsed_times_gpus(slurm_gres, gres_jobs, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm_gres.conf))
    accounted = wait_for("every job to end in sacct", lambda: sacct_ended(slurm_gres, gres_jobs.all), timeout=150)
    priced_setup(slurm_gres.name)

    records = slurm.jobs_read(gres_jobs.all, cluster=slurm_gres.name)
    ingest(as_ingested(records))

    expected = {str(j["job_id"]): sacct_gpu_hours(j) for j in accounted}
    got = billed(slurm_gres.name)
    assert {job: got.get(job, Decimal(0)) for job in expected} == pytest.approx(expected, abs=Decimal("0.00001"))
    states = {r.job_id: r.state for r in records}
    assert [states[j] for j in gres_jobs.ids["timeout"]] == ["timeout"]
    assert [states[j] for j in gres_jobs.ids["running"] + gres_jobs.ids["pending"]] == ["cancelled", "cancelled"]
    assert {states[j] for j in gres_jobs.ids["array"] + gres_jobs.ids["completed"]} == {"completed"}
    assert expected[gres_jobs.ids["timeout"][0]] >= Decimal(60) / HOUR  # it ran its whole minute and more
    assert expected[gres_jobs.ids["completed"][0]] > 0
    assert_billing_invariants()
