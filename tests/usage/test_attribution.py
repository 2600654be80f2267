"""Every GPU-hour reaches a team: the agent's records from real captures, through `import_usage`, to the month.

Each case runs the real agent (dcgm source on a local HTTP server, the kubelet's pod-resources on a gRPC
socket, slurmrestd on HTTP), asserts the records it produced and the jobs and hourly rollups they made,
and ends in one test named `test_..._bills_...` whose last asserts read the month's chargeback.
"""

import io
import json
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command

from collectors.agent import Agent
from collectors.podresources import PodResources
from collectors.pods import KubernetesPods
from collectors.records import JobRecord, SampleRecord, decode_line
from collectors.slurm import SlurmJobs, SlurmRest
from collectors.sources.dcgm import DcgmSource
from governance.costs.selectors import chargeback_by_team
from governance.fleet.models import Gpu
from governance.lib.months import Month
from governance.org.models import ProjectMapping
from governance.usage.models import Job, JobGpuHour, Sample
from tests.collectors.servers import kubelet_served, pages_served
from tests.collectors.test_dcgm import EKS, page
from tests.collectors.test_pods import GPU0
from tests.collectors.test_slurm import SACCT, SQUEUE, read
from tests.collectors.test_slurmrest import TOKEN
from tests.costs.conftest import declare
from tests.factories import rate

pytestmark = pytest.mark.django_db

NOV = Month(2026, 11)
START = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)
VLLM = "dynamo-workload/vllm-agg-0-vllmdecodeworker-s65j5"
GPU5 = "GPU-39e28159-8c62-ee71-64db-b748edd61e15"
POD_LABELS = ',container="main",namespace="dynamo-workload",pod="vllm-agg-0-vllmdecodeworker-s65j5",pod_uid=""'


class Clock:
    def __init__(self, start: datetime) -> None:
        self.at = start

    def now(self) -> datetime:
        return self.at


def run_rounds(agent: Agent, clock: Clock, *, start: datetime, rounds: int, every: timedelta) -> None:
    for i in range(rounds):
        clock.at = start + i * every
        agent.sample()


def imported(out: io.BytesIO, tmp_path, capture) -> list:
    """The agent's records, as it printed them, through `manage.py import_usage`."""
    path = tmp_path / "agent.jsonl"
    path.write_bytes(out.getvalue())
    with capture(execute=True):
        call_command("import_usage", str(path), stdout=io.StringIO())
    return [r for line in out.getvalue().splitlines() for r in decode_line(line)]


def dcgm_agent(url: str, clock: Clock, describe, cluster: str = "eks") -> tuple[Agent, io.BytesIO]:
    out = io.BytesIO()
    source = DcgmSource(cluster=cluster, node="unused", url=f"{url}/metrics", timeout=5)
    return Agent(source=source, collector="test", jobs=describe, dry_run=out, now=clock.now), out


def without_pods(text: str) -> str:
    return text.replace(POD_LABELS, "")


def map_namespace(namespace: str, cast) -> None:
    ProjectMapping.objects.create(
        kind=ProjectMapping.Kind.K8S_NAMESPACE, value=namespace, project=cast.vision.projects.get()
    )


def team_hours(month: Month) -> dict[str, tuple[Decimal, Decimal]]:
    return {c.team: (c.gpu_hours, c.cost) for c in chargeback_by_team(month=month)}


# (a) the EKS page, with the kubelet naming a second pod whose GPU runs nothing


def test_the_eks_page_and_the_kubelet_bill_both_pods_to_their_teams(tmp_path, cast, django_capture_on_commit_callbacks):
    rate(price="2.00")
    map_namespace("dynamo-workload", cast)
    pages = {"/metrics": page(EKS)}
    clock = Clock(START)
    with kubelet_served(tmp_path) as (kubelet, socket), pages_served(pages) as url:
        kubelet.pods = [("dynamo-workload", VLLM.split("/")[1], {"nvidia.com/gpu": [GPU0]}),
                        ("ml", "idle-0", {"nvidia.com/gpu": [GPU5]})]  # fmt: skip
        pods = KubernetesPods(cluster="eks", pod_resources=PodResources(socket))
        agent, out = dcgm_agent(url, clock, pods.describe)
        run_rounds(agent, clock, start=START, rounds=36, every=timedelta(minutes=5))
        pages["/metrics"], kubelet.pods = without_pods(page(EKS)), []
        run_rounds(agent, clock, start=START + timedelta(hours=3), rounds=1, every=timedelta(minutes=5))

    records = imported(out, tmp_path, django_capture_on_commit_callbacks)

    first_round = [r for r in records if isinstance(r, SampleRecord) and r.ts == START]
    assert len(first_round) == 8
    assert {s.gpu_index: s.job_id for s in first_round if s.job_id} == {0: VLLM, 5: "ml/idle-0"}
    ends = {r.job_id: (r.gpus, r.end_time) for r in records if isinstance(r, JobRecord) and r.state == "completed"}
    assert ends == {VLLM: (1, START + timedelta(hours=3)), "ml/idle-0": (1, START + timedelta(hours=3))}
    vllm, idle = Job.objects.get(external_id=VLLM), Job.objects.get(external_id="ml/idle-0")
    assert (vllm.gpus, vllm.project.team, vllm.state) == (1, cast.vision, "completed")
    assert (idle.gpus, idle.account, idle.project) == (1, "ml", None)  # unmapped: unattributed, its name kept
    assert (
        list(JobGpuHour.objects.filter(job=idle).values_list("samples", "sm_samples", "idle_samples"))
        == [(12, 12, 12)] * 3
    )  # held and idle: GPU_UTIL 0 on the page
    charges = team_hours(NOV)
    assert charges["Vision"] == (Decimal(3), Decimal(6))
    assert charges["(unattributed)"] == (Decimal(3), Decimal(6))


# (b) a pod seen only in dcgm's labels, on two GPUs, for three hours


def test_a_pod_seen_only_in_samples_on_two_gpus_for_three_hours_bills_six_gpu_hours_to_its_namespace_team(
    tmp_path, cast, django_capture_on_commit_callbacks
):
    rate(price="2.00")
    map_namespace("dynamo-workload", cast)
    two_gpus = re.sub(r'(\{gpu="1",[^}]*DCGM_FI_DRIVER_VERSION="580.105.08")\}', rf"\1{POD_LABELS}}}", page(EKS))
    pages = {"/metrics": two_gpus}
    clock = Clock(START)
    with pages_served(pages) as url:
        agent, out = dcgm_agent(url, clock, KubernetesPods(cluster="eks").describe)
        run_rounds(agent, clock, start=START, rounds=36, every=timedelta(minutes=5))
        pages["/metrics"] = without_pods(two_gpus)
        run_rounds(agent, clock, start=START + timedelta(hours=3), rounds=1, every=timedelta(minutes=5))

    records = imported(out, tmp_path, django_capture_on_commit_callbacks)

    jobs = [r for r in records if isinstance(r, JobRecord)]  # repeated every 5 minutes while it runs
    assert {(j.job_id, j.project, j.gpus, j.state) for j in jobs[:-1]} == {(VLLM, "dynamo-workload", 2, "running")}
    assert (jobs[-1].state, jobs[-1].end_time) == ("completed", START + timedelta(hours=3))
    job = Job.objects.get(external_id=VLLM)
    assert (job.gpus, job.project.team, job.start_time, job.end_time) == (
        2, cast.vision, START, START + timedelta(hours=3),
    )  # fmt: skip
    hours = JobGpuHour.objects.filter(job=job).values_list("hour", "gpu__index", "samples")
    assert sorted(hours) == [(START + timedelta(hours=h), i, 12) for h in range(3) for i in (0, 1)]
    assert team_hours(NOV)["Vision"] == (Decimal(6), Decimal(12))


# (c) a Slurm job known with 8 GPUs while it ran, whose last record (sacct, no gres/gpu accounting) knows none


def test_a_slurm_job_whose_last_record_does_not_know_its_gpus_still_bills_its_eight_gpus(
    tmp_path, cast, django_capture_on_commit_callbacks
):
    rate(price="2.00")
    # The job spans two nodes of 8 GPUs and only this one runs a collector: the fleet knows 8 GPUs (4 of them the
    # job's, 4 other pods'), so the cluster declares its 16; without it the job's other 4 are an over-claim.
    declare(16, cluster="hpc", since="2025-01-01")
    ProjectMapping.objects.create(value="biology", project=cast.nlp.projects.get())
    started = datetime.fromtimestamp(json.loads(read(SQUEUE))["jobs"][0]["start_time"]["number"], UTC)
    hpc = re.sub(r'(\{gpu="[0-3]",[^}]*DCGM_FI_DRIVER_VERSION="580.105.08")', r'\1,hpc_job="4746"', page(EKS))
    finished = json.loads(read(SACCT))
    finished["jobs"][0]["state"]["current"] = ["COMPLETED"]
    finished["jobs"][0]["time"]["end"] = int((started + timedelta(hours=2)).timestamp())
    pages = {"/metrics": hpc, "/slurm/v0.0.43/job/4746": read(SQUEUE), "/slurmdb/v0.0.43/job/4746": read(SACCT)}
    clock = Clock(started)
    with pages_served(pages) as url:
        rest = SlurmRest(url, environ={"SLURM_JWT": TOKEN})
        slurm = SlurmJobs(cluster="hpc", read=rest.jobs_read, clock=lambda: clock.at.timestamp())
        agent, out = dcgm_agent(url, clock, slurm.describe, cluster="hpc")
        run_rounds(agent, clock, start=started, rounds=12, every=timedelta(minutes=10))
        # Gone from slurmctld (which says so, as the real slurmrestd does: error 2017); slurmdbd has its end.
        unknown = {"jobs": [], "errors": [{"error_number": 2017, "description": "Invalid job id specified"}]}
        pages["/slurm/v0.0.43/job/4746"] = json.dumps(unknown)
        pages["/slurmdb/v0.0.43/job/4746"] = json.dumps(finished)
        pages["/metrics"] = page(EKS)
        # The last scrape, in the hour after the job's (its GPUs then show other pods: in the job's own last hour
        # two jobs seen on one GPU would share it).
        after = started.replace(minute=0, second=0) + timedelta(hours=3, minutes=5)
        run_rounds(agent, clock, start=after, rounds=1, every=timedelta(minutes=10))

    records = imported(out, tmp_path, django_capture_on_commit_callbacks)

    jobs = [r for r in records if isinstance(r, JobRecord)]
    assert {(j.gpus, j.state) for j in jobs[:-1]} == {(8, "running")}
    assert (jobs[-1].gpus, jobs[-1].state, jobs[-1].end_time) == (None, "completed", started + timedelta(hours=2))
    job = Job.objects.get(external_id="4746")
    assert (job.gpus, job.state, job.project.team, job.gpu_model) == (8, "completed", cast.nlp, "NVIDIA H100 80GB HBM3")
    assert JobGpuHour.objects.filter(job=job).values("gpu").distinct().count() == 4  # this node's half
    assert team_hours(Month(2025, 11))["NLP"] == (Decimal(16), Decimal(32))


# (d) a trimmed counters file: no SM activity, no FB lines, only power


def test_a_trimmed_dcgm_page_still_samples_every_gpu_with_nulls_and_bills_the_pod(
    tmp_path, cast, django_capture_on_commit_callbacks
):
    rate(price="2.00")
    map_namespace("dynamo-workload", cast)
    trimmed = "\n".join(line for line in page(EKS).splitlines() if line.startswith("DCGM_FI_DEV_POWER_USAGE"))
    clock = Clock(START)
    pages = {"/metrics": trimmed}
    with pages_served(pages) as url:
        agent, out = dcgm_agent(url, clock, KubernetesPods(cluster="eks").describe)
        run_rounds(agent, clock, start=START, rounds=24, every=timedelta(minutes=5))
        pages["/metrics"] = without_pods(trimmed)
        run_rounds(agent, clock, start=START + timedelta(hours=2), rounds=1, every=timedelta(minutes=5))

    records = imported(out, tmp_path, django_capture_on_commit_callbacks)

    samples = [r for r in records if isinstance(r, SampleRecord)]
    assert len(samples) == 25 * 8
    assert {(s.sm_util, s.mem_used_mib, s.mem_total_mib) for s in samples} == {(None, None, None)}
    assert all(s.power_w is not None for s in samples)
    assert Sample.objects.filter(sm_util__isnull=True).count() == 200
    assert set(Gpu.objects.values_list("memory_total_mib", flat=True)) == {None}
    job = Job.objects.get(external_id=VLLM)
    hours = JobGpuHour.objects.filter(job=job).values_list("samples", "sm_samples", "idle_samples", "mem_used_max")
    assert list(hours) == [(12, 0, 0, None), (12, 0, 0, None)]  # unknown SM: neither 0 nor idle
    from governance.efficiency.services import findings_evaluate

    findings_evaluate(job_ids=[job.pk], final=True)
    assert not job.findings.exists()
    assert team_hours(NOV)["Vision"] == (Decimal(2), Decimal(4))


# (e) MIG series become MIG instances


def test_mig_series_become_mig_instances_and_bill_their_slice(tmp_path, cast, django_capture_on_commit_callbacks):
    rate(model="*", price="7.00")
    map_namespace("dynamo-workload", cast)
    mig_page = page("nvidia-docs-a100-mig_excerpt.prom").replace(
        'GPU_I_ID="13",', 'GPU_I_ID="13",namespace="dynamo-workload",pod="mig-0",'
    )
    clock = Clock(START)
    pages = {"/metrics": mig_page}
    with pages_served(pages) as url:
        agent, out = dcgm_agent(url, clock, KubernetesPods(cluster="eks").describe)
        run_rounds(agent, clock, start=START, rounds=14, every=timedelta(minutes=30))
        pages["/metrics"] = page("nvidia-docs-a100-mig_excerpt.prom")
        run_rounds(agent, clock, start=START + timedelta(hours=7), rounds=1, every=timedelta(minutes=30))

    records = imported(out, tmp_path, django_capture_on_commit_callbacks)

    whole, mig = [r for r in records if isinstance(r, SampleRecord)][:2]
    assert (whole.gpu_uuid, whole.mig_profile, whole.job_id) == ("GPU-34319582-d595-d1c7-d1d2-179bcfa61660", None, None)
    assert (mig.gpu_uuid, mig.mig_profile, mig.job_id) == (
        "GPU-34319582-d595-d1c7-d1d2-179bcfa61660/gi13", "1g.5gb", "dynamo-workload/mig-0",
    )  # fmt: skip
    assert mig.sm_util == pytest.approx(99.5687)
    assert sorted(Gpu.objects.values_list("uuid", "mig_profile")) == [
        ("GPU-34319582-d595-d1c7-d1d2-179bcfa61660", ""),
        ("GPU-34319582-d595-d1c7-d1d2-179bcfa61660/gi13", "1g.5gb"),
    ]
    job = Job.objects.get(external_id="dynamo-workload/mig-0")
    assert (job.gpus, job.end_time) == (1, START + timedelta(hours=7))
    assert set(JobGpuHour.objects.filter(job=job).values_list("gpu__mig_profile", flat=True)) == {"1g.5gb"}
    assert team_hours(NOV)["Vision"] == (Decimal(1), Decimal(7))  # 7 h of a 1/7 slice at 7.00 a GPU-hour
