"""Pods as jobs: the kubelet's pod-resources API (a real gRPC server on a unix socket) and dcgm's pod labels."""

import io
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from collectors.agent import Agent
from collectors.podresources import PodResources, PodResourcesUnavailable
from collectors.pods import KubernetesPods
from collectors.records import JobRecord, SampleRecord, decode_line
from collectors.sources.dcgm import DcgmSource
from tests.collectors.servers import kubelet_served, pages_served
from tests.collectors.test_dcgm import EKS, page

START = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)
VLLM = "dynamo-workload/vllm-agg-0-vllmdecodeworker-s65j5"
GPU0, GPU1, GPU2 = (
    "GPU-c4529c8d-69c4-b61d-e0bc-7b2460096005",
    "GPU-bc5610b9-79c8-fedd-8899-07539c7f868a",
    "GPU-fbc2c554-4d37-8938-0032-f923bad0f716",
)


class Rounds:
    def __init__(self, every: timedelta = timedelta(minutes=1)) -> None:
        self.at, self.every = START - every, every

    def __call__(self) -> datetime:
        self.at += self.every
        return self.at


def agent_of(url: str, pods: KubernetesPods, now=None) -> tuple[Agent, io.BytesIO]:
    out = io.BytesIO()
    source = DcgmSource(cluster="eks", node="n1", url=f"{url}/metrics", timeout=5)
    return Agent(source=source, collector="test", jobs=pods.describe, dry_run=out, now=now or Rounds()), out


def records_of(out: io.BytesIO) -> list:
    return [r for line in out.getvalue().splitlines() for r in decode_line(line)]


def test_the_kubelet_lists_the_gpus_each_pod_holds(tmp_path):
    with kubelet_served(tmp_path) as (kubelet, socket):
        kubelet.pods = [
            ("ml", "trainer-0", {"nvidia.com/gpu": [GPU1, GPU2]}),
            ("ml", "mig-user", {"nvidia.com/mig-1g.10gb": ["MIG-0001"]}),
            ("web", "nginx", {"example.com/nic": ["eth1"]}),
        ]
        lister = PodResources(socket)

        held = lister.held()
        lister.close()

    assert held == {GPU1: ("ml", "trainer-0"), GPU2: ("ml", "trainer-0"), "MIG-0001": ("ml", "mig-user")}


def test_an_absent_kubelet_socket_is_reported_as_unavailable(tmp_path):
    with pytest.raises(PodResourcesUnavailable, match="pod-resources"):
        PodResources(str(tmp_path / "none.sock"), timeout=1).held()


def test_a_pod_holding_gpus_with_no_process_on_them_is_described_and_its_gpus_samples_name_it(tmp_path):
    with kubelet_served(tmp_path) as (kubelet, socket), pages_served({"/metrics": page(EKS)}) as url:
        kubelet.pods = [
            ("ml", "trainer-0", {"nvidia.com/gpu": [GPU1, GPU2]}),
            (*VLLM.split("/"), {"nvidia.com/gpu": [GPU0]}),
        ]
        agent, out = agent_of(url, KubernetesPods(cluster="eks", pod_resources=PodResources(socket)))

        agent.sample()

    records = records_of(out)
    jobs = {r.job_id: r for r in records if isinstance(r, JobRecord)}
    samples = [r for r in records if isinstance(r, SampleRecord)]
    assert len(samples) == 8
    assert [s.job_id for s in samples[:3]] == [VLLM, "ml/trainer-0", "ml/trainer-0"]
    assert [s.job_id for s in samples[3:]] == [None] * 5
    trainer = jobs["ml/trainer-0"]
    assert (trainer.project, trainer.gpus, trainer.state, trainer.start_time) == ("ml", 2, "running", START)
    assert (trainer.gpu_model, trainer.user, trainer.labels) == (
        "NVIDIA H100 80GB HBM3",
        "unknown",
        {"namespace": "ml"},
    )
    assert (jobs[VLLM].project, jobs[VLLM].gpus) == ("dynamo-workload", 1)


def test_a_pod_seen_only_in_dcgm_labels_is_described_and_ends_completed_once_gone(tmp_path):
    pages = {"/metrics": page(EKS)}
    with pages_served(pages) as url:
        agent, out = agent_of(url, KubernetesPods(cluster="eks"))
        agent.sample()
        agent.sample()  # the same pod, the same GPUs: nothing new to say
        pages["/metrics"] = "\n".join(line for line in page(EKS).splitlines() if "pod=" not in line)
        agent.sample()

    jobs = [r for r in records_of(out) if isinstance(r, JobRecord)]
    assert [(j.job_id, j.gpus, j.state, j.end_time) for j in jobs] == [
        (VLLM, 1, "running", None),
        (VLLM, 1, "completed", START + timedelta(minutes=2)),
    ]
    assert jobs[1].start_time == START


def test_a_round_that_read_nothing_does_not_end_the_pods():
    pods = KubernetesPods(cluster="eks")
    sample = SampleRecord(cluster="eks", node="n", gpu_uuid=GPU0, gpu_index=0, gpu_model="m", ts=START, job_id=VLLM)

    assert [j.state for j in pods.describe([sample], START)] == ["running"]
    assert pods.describe([], START + timedelta(minutes=1)) == []  # the exporter did not answer
    assert VLLM in pods.pods


def test_pod_labels_in_the_pods_file_name_the_project_team_and_start(tmp_path):
    pods_file = tmp_path / "pods.json"
    pods_file.write_text(json.dumps({"0f1e2d3c-0000-4000-8000-000000000000": {
        "namespace": "dynamo-workload", "name": VLLM.split("/")[1], "start_time": "2026-11-03T08:30:00Z",
        "labels": {"gpu-governance/project": "serving", "gpu-governance/team": "inference"},
    }}))  # fmt: skip
    pods = KubernetesPods(cluster="eks", pods_file=str(pods_file))
    sample = SampleRecord(cluster="eks", node="n", gpu_uuid=GPU0, gpu_index=0, gpu_model="m", ts=START, job_id=VLLM)

    (job,) = pods.describe([sample], START)

    assert (job.project, job.team, job.start_time) == ("serving", "inference", START - timedelta(minutes=30))


def test_the_kubelet_names_the_pod_where_the_mapper_knew_only_its_uid(tmp_path):
    uid = "0f1e2d3c-0000-4000-8000-000000000000"
    sample = SampleRecord(cluster="eks", node="n", gpu_uuid=GPU1, gpu_index=1, gpu_model="m", ts=START, job_id=uid)
    with kubelet_served(tmp_path) as (kubelet, socket):
        kubelet.pods = [("ml", "trainer-0", {"nvidia.com/gpu": [GPU1]})]
        (job,) = KubernetesPods(cluster="eks", pod_resources=PodResources(socket)).describe([sample], START)

    assert (sample.job_id, job.job_id, job.gpus) == ("ml/trainer-0", "ml/trainer-0", 1)


def sliced(kubelet, replicas: dict[str, int] | None) -> None:
    """GPU1 time-sliced into 4 replicas: pods a and b hold one each, c two; the kubelet lists the replicas as
    allocatable unless `replicas` is None."""
    kubelet.allocatable = {"nvidia.com/gpu": [f"{GPU1}::{n}" for n in range(4)] + [GPU2]} if replicas else {}
    kubelet.pods = [
        ("ml", "a", {"nvidia.com/gpu": [f"{GPU1}::0"]}),
        ("ml", "b", {"nvidia.com/gpu": [f"{GPU1}::3"]}),
        ("ml", "c", {"nvidia.com/gpu": [f"{GPU1}::1", f"{GPU1}::2"]}),
    ]


def test_pods_holding_replicas_of_a_time_sliced_gpu_declare_their_share_and_its_samples_name_each_in_turn(tmp_path):
    with kubelet_served(tmp_path) as (kubelet, socket), pages_served({"/metrics": page(EKS)}) as url:
        sliced(kubelet, {GPU1: 4})
        agent, out = agent_of(url, KubernetesPods(cluster="eks", pod_resources=PodResources(socket)))
        for _ in range(4):
            agent.sample()

    records = records_of(out)
    shares = {r.job_id: r.gpus for r in records if isinstance(r, JobRecord) and r.project == "ml"}
    assert shares == {"ml/a": Decimal("0.25"), "ml/b": Decimal("0.25"), "ml/c": Decimal("0.5")}
    assert [s.job_id for s in records if isinstance(s, SampleRecord) and s.gpu_uuid == GPU1] == [
        "ml/a", "ml/c", "ml/b", "ml/a",
    ]  # fmt: skip
    assert b'"gpus":0.25' in out.getvalue()  # a number on the wire, as the record contract writes it


def test_a_replica_of_a_gpu_whose_replicas_the_kubelet_does_not_list_is_a_share_nobody_knows(tmp_path):
    with kubelet_served(tmp_path) as (kubelet, socket), pages_served({"/metrics": page(EKS)}) as url:
        sliced(kubelet, None)
        agent, out = agent_of(url, KubernetesPods(cluster="eks", pod_resources=PodResources(socket)))
        agent.sample()

    shares = {r.job_id: r.gpus for r in records_of(out) if isinstance(r, JobRecord) and r.project == "ml"}
    assert shares == {"ml/a": None, "ml/b": None, "ml/c": None}
