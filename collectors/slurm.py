"""Slurm job metadata: what `sacct --json` and `squeue --json` print, turned into job records.

The account becomes the record's project; which team an account belongs to is the server's project
mapping, never guessed here. GPU counts come from the allocated TRES where Slurm accounts `gres/gpu`,
else from the job's gres (squeue's gres_detail, or the per-job/per-node TRES request); where the JSON
accounts none of them (sacct on a cluster without `gres/gpu` accounting) the count is unknown (None),
never 0, and the server keeps the count an earlier record knew.

The same JSON comes from the commands (`squeue --json`, `sacct --json`) or from slurmrestd over HTTP
(`SlurmRest`, the schema of the same data_parser version).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import msgspec

from collectors.records import JobRecord, JobState, Record, SampleRecord
from collectors.runs import MAX_RUNS, Run

STATES: dict[str, JobState] = {
    "PENDING": "pending", "REQUEUED": "pending", "REQUEUE_HOLD": "pending", "REQUEUE_FED": "pending",
    "RUNNING": "running", "CONFIGURING": "running", "COMPLETING": "running", "SUSPENDED": "running",
    "STAGE_OUT": "running", "SIGNALING": "running", "RESIZING": "running",
    "COMPLETED": "completed", "FAILED": "failed", "BOOT_FAIL": "failed", "DEADLINE": "failed",
    "CANCELLED": "cancelled", "REVOKED": "cancelled", "TIMEOUT": "timeout", "PREEMPTED": "preempted",
    "NODE_FAIL": "node_fail", "OUT_OF_MEMORY": "out_of_memory",
}  # fmt: skip
_SLURM_ID = re.compile(r"^\d+(?:[_+]\d+)?$")  # 4746, an array task 4746_3, a het component 4746+0
log = logging.getLogger("gpu-collector")
_GRES_GPU = re.compile(r"(?:^|,)(?:gres/)?gpu(?::[^:,()]+)?[:=](\d+)")


class SlurmError(Exception):
    pass


# What Slurm answers for a job it does not hold: slurmctld ESLURM_INVALID_JOB_ID, slurmdbd "Nothing found".
_NOT_FOUND = {2017, 9003}


def _not_found(error: dict[str, Any]) -> bool:
    if "error_number" in error:
        return error["error_number"] in _NOT_FOUND
    return "invalid job id" in str(error.get("description", "")).lower()


def _describe(errors: list[dict[str, Any]]) -> str:
    return "; ".join(str(e.get("error") or e.get("description") or e) for e in errors)


def _number(value: Any) -> int | None:
    """Slurm >= 23 wraps numbers as {"set": bool, "infinite": bool, "number": n}; older versions print n."""
    if isinstance(value, dict):
        return int(value["number"]) if value.get("set") and not value.get("infinite") else None
    return int(value) if isinstance(value, int | float) else None


def _time(value: Any) -> datetime | None:
    seconds = _number(value)
    return datetime.fromtimestamp(seconds, UTC) if seconds else None


def _gres_count(text: str) -> int:
    return sum(int(m[1]) for m in _GRES_GPU.finditer(text or ""))


def _tres_gpus(items: list[dict[str, Any]]) -> int:
    return sum(int(t["count"]) for t in items or [] if t.get("type") == "gres" and t.get("name", "").startswith("gpu"))


def _gpu_counts(job: dict[str, Any]) -> Iterator[int]:
    """The job's GPU count as each field accounts it, most trusted first (0 where a field does not)."""
    tres = job.get("tres")
    if not isinstance(tres, dict):
        tres = {}
    yield _tres_gpus(tres.get("allocated", []))  # sacct, where the cluster accounts gres/gpu
    yield sum(_gres_count(d.split("(")[0]) for d in job.get("gres_detail") or [])  # squeue: "gpu:h100:4(IDX:0-3)"
    yield _gres_count(job.get("tres_alloc_str", ""))
    yield _gres_count(job.get("tres_per_job", ""))
    yield _gres_count(job.get("tres_per_node", "")) * (_number(job.get("node_count")) or 1)
    yield _tres_gpus(tres.get("requested", []))
    yield _gres_count(job.get("used_gres", ""))


def gpus_of(job: dict[str, Any]) -> int | None:
    """The job's GPUs from the first field that accounts them; None where none does (unknown, never 0)."""
    return next((n for n in _gpu_counts(job) if n > 0), None)


def _state(job: dict[str, Any]) -> JobState:
    raw = job.get("job_state") or job.get("state", {}).get("current") or ["PENDING"]
    names = raw if isinstance(raw, list) else [raw]
    return next((STATES[n] for n in names if n in STATES), "running")


def job_record(job: dict[str, Any], *, cluster: str | None = None) -> JobRecord:
    """One job of either tool's JSON (the squeue schema has flat times, the sacct schema a `time` object)."""
    times = job.get("time", {})
    submit = _time(job.get("submit_time", times.get("submission")))
    start = _time(job.get("start_time", times.get("start")))
    state = _state(job)
    # squeue's end_time of a running job is its time limit, not an end; only a finished job has ended.
    end = _time(job.get("end_time", times.get("end"))) if state not in ("pending", "running") else None
    if state == "pending":
        start = None
    submit = submit or start or datetime.now(UTC)
    labels = {"partition": job.get("partition") or "", "qos": job.get("qos") or "", "name": job.get("name") or ""}
    # squeue's end of a running job is when Slurm will end it (its time limit): remediation prices what it frees
    limit = _time(job.get("end_time")) if state == "running" else None
    if limit is not None and start is not None and limit > start:
        labels["time_limit_at"] = limit.strftime("%Y-%m-%dT%H:%M:%SZ")
    return JobRecord(
        cluster=cluster or job.get("cluster") or "default",
        job_id=str(job["job_id"]),
        user=job.get("user_name") or job.get("user") or "unknown",
        project=job.get("account") or "unknown",
        gpus=None if (count := gpus_of(job)) is None else Decimal(count),
        submit_time=submit,
        start_time=start,
        end_time=end if start is not None and end is not None and end >= start else None,
        state=state,
        labels={k: v for k, v in labels.items() if v},
    )


def _run(job: dict[str, Any]) -> Run | None:
    """The run one sacct record accounts (a requeued job has a record per run); None for squeue's schema, or a record
    that never started."""
    times = job.get("time")
    if not isinstance(times, dict) or (start := _time(times.get("start"))) is None:
        return None
    end = _time(times.get("end"))
    return Run(start, end if end is not None and end >= start else None)


def parse(text: str, *, cluster: str | None = None) -> list[JobRecord]:
    """One record per job; where sacct (--duplicates) prints several records of a job id (it was requeued: the earlier
    runs are REQUEUED records), the latest describes the job and all of them its runs."""
    data = json.loads(text)
    if data.get("errors"):
        raise SlurmError("; ".join(str(e.get("description") or e) for e in data["errors"]))
    jobs: dict[tuple[str, str], JobRecord] = {}
    runs: dict[tuple[str, str], list[Run]] = defaultdict(list)
    submitted: dict[tuple[str, str], list[datetime]] = defaultdict(list)
    for job in data.get("jobs", []):
        record = job_record(job, cluster=cluster)
        key = (record.cluster, record.job_id)
        jobs[key] = record
        submitted[key].append(record.submit_time)
        if (run := _run(job)) is not None:
            runs[key].append(run)
    for key, record in jobs.items():
        if len(submitted[key]) > 1:
            mine = sorted(runs[key], key=lambda r: r.start)[-MAX_RUNS:]
            # Slurm submits a requeued job anew: the job was submitted when its first record says.
            submit = min([*submitted[key], *(r.start for r in mine)])
            jobs[key] = msgspec.structs.replace(record, runs=mine, submit_time=submit)
    return list(jobs.values())


def merge(accounted: list[JobRecord], queued: list[JobRecord]) -> list[JobRecord]:
    """sacct knows finished jobs, squeue knows live ones best (its gres); squeue's view wins where both have a job,
    except that a job sacct has seen end has ended (squeue still shows it COMPLETING while its processes are reaped),
    and a count one of them knows fills in for the other's unknown one."""
    jobs = {(j.cluster, j.job_id): j for j in accounted}
    for job in queued:
        other = jobs.get((job.cluster, job.job_id))
        if other is not None and other.end_time is not None and job.end_time is None:
            job, other = other, job
        if job.gpus is None and other is not None and other.gpus is not None:
            job = msgspec.structs.replace(job, gpus=other.gpus)
        if not job.runs and other is not None and other.runs:  # only sacct knows a requeued job's earlier runs
            job = msgspec.structs.replace(job, runs=other.runs, submit_time=min(job.submit_time, other.submit_time))
        jobs[(job.cluster, job.job_id)] = job
    return list(jobs.values())


def run_json(command: list[str], timeout: float = 60.0) -> str:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)  # noqa: S603
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"{command[0]}: {exc}") from None
    if result.returncode != 0:
        raise SlurmError(f"{' '.join(command)} exited {result.returncode}: {result.stderr.strip()[:500]}")
    return result.stdout


def jobs_read(job_ids: list[str], *, cluster: str | None = None) -> list[JobRecord]:
    """The records of these jobs as Slurm knows them now (both tools, one call each)."""
    if not job_ids:
        return []
    ids = ",".join(sorted(job_ids))
    queued = parse(run_json(["squeue", "--json", f"--jobs={ids}"]), cluster=cluster)
    accounted = parse(run_json(["sacct", "--json", "--duplicates", f"--jobs={ids}"]), cluster=cluster)
    # squeue --json of Slurm 22.05 ignores --jobs (it prints every job of the cluster), and an array's first id
    # names all its tasks: only the jobs asked for are reported.
    asked = set(job_ids)
    return [job for job in merge(accounted, queued) if job.job_id in asked]


class SlurmRest:
    """slurmrestd: the same two views over HTTP (slurmctld's live jobs, slurmdbd's accounted ones), one GET each
    per job, authenticated with a JWT (`scontrol token`) from SLURM_JWT and the user name from SLURM_USER_NAME
    (else USER)."""

    def __init__(
        self, url: str, *, version: str = "v0.0.43", timeout: float = 30.0, environ: Mapping[str, str] = os.environ
    ) -> None:
        self.url, self.version, self.timeout = url.rstrip("/"), version, timeout
        self.headers = {"Accept": "application/json"}
        if token := environ.get("SLURM_JWT"):
            self.headers["X-SLURM-USER-TOKEN"] = token
        if user := environ.get("SLURM_USER_NAME") or environ.get("USER"):
            self.headers["X-SLURM-USER-NAME"] = user

    def get(self, path: str) -> str | None:
        """The JSON at `path` (an answer with Slurm errors included), or None where it is empty."""
        request = urllib.request.Request(f"{self.url}/{path}", headers=self.headers)  # noqa: S310 - operator's URL
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                return response.read().decode()
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise SlurmError(f"slurmrestd refused {path} ({exc.code}): is SLURM_JWT set and valid?") from None
            body = exc.read().decode(errors="replace")
            if not body.lstrip().startswith("{"):  # slurmrestd's own 404: no such path, e.g. another data_parser
                raise SlurmError(
                    f"slurmrestd has no {path} ({exc.code}): is the version {self.version} right?"
                ) from None
            return body
        except (urllib.error.URLError, OSError) as exc:
            raise SlurmError(f"slurmrestd at {self.url}: {exc}") from None

    def _jobs(self, path: str, cluster: str | None) -> list[JobRecord]:
        text = self.get(path)
        if not text:
            return []
        data = json.loads(text)
        errors = data.get("errors") or []
        if errors and all(_not_found(e) for e in errors):
            log.debug("slurmrestd: %s: %s", path, errors)  # a job this daemon does not hold (gone, or not yet)
            return []
        if errors:
            # A forged or expired token is no 401 in Slurm 22.05: slurmctld's answer is a 500 "Unable to find JobId"
            # with error_number -1, slurmdbd's a 200 with "Protocol authentication error" (1007).
            raise SlurmError(f"slurmrestd {path}: {_describe(errors)}: is SLURM_JWT set and valid?")
        return parse(text, cluster=cluster)

    def jobs_read(self, job_ids: list[str], *, cluster: str | None = None) -> list[JobRecord]:
        queued: list[JobRecord] = []
        accounted: list[JobRecord] = []
        for job_id in sorted(job_ids):
            queued += self._jobs(f"slurm/{self.version}/job/{job_id}", cluster)
            accounted += self._jobs(f"slurmdb/{self.version}/job/{job_id}", cluster)
        asked = set(job_ids)  # an array's first id answers with all its tasks
        return [job for job in merge(accounted, queued) if job.job_id in asked]


class SlurmJobs:
    """Job records for the jobs the agent's samples name: every `every` seconds, one sacct and one squeue (or
    their slurmrestd equivalents)."""

    def __init__(self, *, cluster: str | None, every: float = 300.0, read=jobs_read, clock=None) -> None:
        import time

        self.cluster, self.every, self.read = cluster, every, read
        self.clock = clock or time.monotonic
        self.known: set[str] = set()
        self.last: float | None = None

    def __call__(self, seen: set[str]) -> list[JobRecord]:
        fresh = seen - self.known
        self.known |= seen
        if not fresh and self.last is not None and self.clock() - self.last < self.every:
            return []
        self.last = self.clock()
        try:
            records = self.read(sorted(self.known), cluster=self.cluster)
        except SlurmError as exc:
            log.warning("slurm: %s; job records wait for the next round", exc)
            return []
        # A finished job is reported once more (its end and state) and then forgotten.
        self.known -= {r.job_id for r in records if r.end_time is not None}
        return records

    def describe(self, records: list[Record], now: datetime) -> list[JobRecord]:
        """The agent's hook: the Slurm job ids the round's samples name (not pods' `namespace/pod`)."""
        return self(
            {r.job_id for r in records if isinstance(r, SampleRecord) and r.job_id and _SLURM_ID.match(r.job_id)}
        )
