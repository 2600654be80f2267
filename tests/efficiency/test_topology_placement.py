"""Placement on a node: a job whose GPUs talk across sockets while an NVLink or one-switch pair sat free is told
which GPUs to ask for; the topology arrives from the collector through the API."""

import json
from pathlib import Path

import pytest

from collectors.topology import parse_topo_matrix
from governance.efficiency.models import Finding
from governance.efficiency.services import findings_evaluate_all
from governance.fleet.models import NodeTopology
from tests.efficiency.conftest import a_job, gpu
from tests.factories import at, ingest, rate
from tests.invariants import assert_billing_invariants

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "topology"
URL = "/api/v1/topology/"


def report(name: str, node: str = "gpu-017", cluster: str = "c1") -> dict:
    topology = parse_topo_matrix((FIXTURES / name).read_text())
    links = {f"{i}-{j}": link for (i, j), link in topology.links.items()}
    return {"cluster": cluster, "node": node, "gpus": topology.gpus, "links": links, "source": "nvidia-smi"}


def post(client, body: dict, token: str):
    return client.post(
        URL, data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def two_gpu_job(job_id: str, indexes: tuple[int, int], *, minutes: int = 120, sm: float = 80.0) -> list[dict]:
    records = [a_job(minutes=minutes, job_id=job_id, gpus=2)]
    for index in indexes:
        records += gpu(minutes=minutes, job_id=job_id, uuid=f"GPU-{index}", gpu_index=index, sm_util=sm)
    return records


def test_a_job_across_sockets_is_told_the_free_pair_on_one_switch(client, cast, ingest_token):
    rate(price="2.00")
    assert post(client, report("pcie-l40s-8gpu-2socket.txt"), ingest_token).status_code == 200
    ingest(two_gpu_job("77", (0, 4)))

    findings_evaluate_all(now=at("2026-11-10T00:00:00Z"))
    finding = Finding.objects.get(rule="topology_split")

    assert finding.evidence == {"node": "gpu-017", "gpu_indexes": [0, 4], "link": "SYS", "free_indexes": [0, 1],
                                "free_link": "PIX"}  # fmt: skip
    assert finding.advice.startswith(
        "The job's GPUs on gpu-017 (GPU0, GPU4) talk across CPU sockets (SYS) while GPU0, GPU1, connected through "
        "one PCIe switch (PIX), sat free on the node for the whole run."
    )
    assert "--gres-flags=enforce-binding" in finding.advice
    assert_billing_invariants()


def test_nothing_is_said_when_the_nearer_gpus_were_held_by_other_jobs_or_every_pair_is_nvlink(
    client, cast, ingest_token
):
    rate(price="2.00")
    post(client, report("pcie-l40s-8gpu-2socket.txt"), ingest_token)
    post(client, report("dgx-h100-8gpu-nvlink.txt", node="dgx-01"), ingest_token)
    records = two_gpu_job("77", (0, 4))
    for index in (1, 2, 3, 5, 6, 7):  # another job holds every other GPU of the node for the whole run
        records += gpu(minutes=120, job_id="88", uuid=f"GPU-{index}", gpu_index=index, sm_util=90.0)
    records.append(a_job(minutes=120, job_id="88", gpus=6))
    records += [{**r, "job_id": "99"} if r["kind"] == "job" else {**r, "job_id": "99", "node": "dgx-01",
                "gpu_uuid": r["gpu_uuid"] + "-dgx"} for r in two_gpu_job("99", (0, 4))]  # fmt: skip
    ingest(records)

    findings_evaluate_all(now=at("2026-11-10T00:00:00Z"))

    assert not Finding.objects.filter(rule="topology_split").exists()
    assert_billing_invariants()


def test_the_api_stores_the_latest_report_and_refuses_a_bad_one_naming_the_field(
    client, cast, ingest_token, read_token
):
    first = post(client, report("pcie-l40s-8gpu-2socket.txt"), ingest_token)
    again = post(client, report("pcie-a100-8gpu-nvlink-bridges.txt"), ingest_token)
    broken = report("dgx-h100-8gpu-nvlink.txt")
    broken["links"]["3-5"] = "FAST"
    refused = post(client, broken, ingest_token)
    other = post(client, report("dgx-h100-8gpu-nvlink.txt", cluster="elsewhere"), ingest_token)
    reader = post(client, report("dgx-h100-8gpu-nvlink.txt"), read_token)

    assert (first.status_code, again.status_code) == (200, 200)
    stored = NodeTopology.objects.get()
    assert (stored.node.name, stored.gpus, stored.links["0-1"]) == ("gpu-017", 8, "NV12")
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_topology"
    assert "links" in refused.json()["error"]["details"] and "3-5" in refused.json()["error"]["details"]
    assert other.status_code == 400 and other.json()["error"]["code"] == "cluster_not_allowed"
    assert reader.status_code == 403
    assert NodeTopology.objects.get().links["0-1"] == "NV12"


@pytest.mark.parametrize("body", [b"{", b'{"cluster": "c1"}'])
def test_a_report_that_is_not_one_writes_nothing(client, cast, ingest_token, body):
    response = client.post(URL, data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {ingest_token}")

    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_topology"
    assert not NodeTopology.objects.exists()
