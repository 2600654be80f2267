"""A pod's share of one GPU under MPS: its active thread percentage (the pod's env, bounded by the control daemon's
default), through the pods file to its job record. The daemon is a script standing in for nvidia-cuda-mps-control
at its command line, the boundary the agent talks to."""

import json
import stat
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from collectors.mps import MpsControl, mps_share
from collectors.pods import KubernetesPods
from collectors.records import SampleRecord

START = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)
GPU = "GPU-bc5610b9-79c8-fedd-8899-07539c7f868a"
PIPE = {"CUDA_MPS_PIPE_DIRECTORY": "/run/nvidia-mps"}


@pytest.mark.parametrize(
    ("env", "daemon", "share"),
    [
        ({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30"}, None, Decimal("0.3")),
        ({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30"}, Decimal(100), Decimal("0.3")),
        ({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "40"}, Decimal(25), Decimal("0.25")),  # the daemon's lower cap wins
        (PIPE, Decimal("12.5"), Decimal("0.125")),  # a client with no percentage of its own: the daemon's default
        (PIPE, None, None),  # nothing says a share
        (PIPE, Decimal(100), None),  # the whole GPU: what the device ids say
        ({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "150"}, Decimal(25), None),  # malformed: says nothing
        ({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "a third"}, None, None),
        ({"OTHER": "1"}, Decimal(25), None),  # no MPS client
    ],
)
def test_an_mps_clients_share_is_the_lower_of_its_percentage_and_the_daemons(env, daemon, share):
    assert mps_share({"env": env}, daemon) == share


def daemon(tmp_path, answer: str):
    """nvidia-cuda-mps-control as its command line behaves: reads a command on stdin, prints the answer."""
    script = tmp_path / "nvidia-cuda-mps-control"
    log = tmp_path / "asked"
    script.write_text(f"#!/bin/sh\ncat >> {log}\necho '{answer}'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return MpsControl([str(script)]), log


def pods_file(tmp_path, pods: dict) -> str:
    path = tmp_path / "pods.json"
    entries = {f"0f1e2d3c-0000-4000-8000-00000000000{i}": {"namespace": "ml", "name": n, **p}
               for i, (n, p) in enumerate(pods.items())}  # fmt: skip
    path.write_text(json.dumps(entries))
    return str(path)


def seen(job: str, n: int) -> SampleRecord:
    return SampleRecord(cluster="eks", node="n", gpu_uuid=f"{GPU[:-1]}{n}", gpu_index=n, gpu_model="m", ts=START,
                        job_id=job, mem_total_mib=81559)  # fmt: skip


def test_mps_pods_in_the_pods_file_are_recorded_with_their_active_thread_percentage(tmp_path):
    control, asked = daemon(tmp_path, "25.0")
    pods = KubernetesPods(cluster="eks", mps=control, pods_file=pods_file(tmp_path, {
        "own": {"env": {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "20"}},
        "capped": {"env": {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "60"}},
        "default": {"env": PIPE},
        "runai": {"env": PIPE, "annotations": {"gpu-fraction": "0.5"}},  # a request says it: MPS does not
        "plain": {},
    }))  # fmt: skip

    records = pods.describe([seen(f"ml/{n}", i) for i, n in enumerate(("own", "capped", "default", "runai", "plain"))],
                            START)  # fmt: skip

    assert {r.job_id: r.gpus for r in records} == {
        "ml/own": Decimal("0.2"), "ml/capped": Decimal("0.25"), "ml/default": Decimal("0.25"),
        "ml/runai": Decimal("0.5"), "ml/plain": 1,
    }  # fmt: skip
    assert asked.read_text() == "get_default_active_thread_percentage\n"  # asked once for the round


def test_without_a_daemon_answer_only_a_pods_own_percentage_says_its_share(tmp_path):
    missing = MpsControl([str(tmp_path / "no-such-command")])
    pods = KubernetesPods(cluster="eks", mps=missing, pods_file=pods_file(tmp_path, {
        "own": {"env": {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "20"}}, "default": {"env": PIPE},
    }))  # fmt: skip

    records = pods.describe([seen("ml/own", 0), seen("ml/default", 1)], START)

    assert {r.job_id: r.gpus for r in records} == {"ml/own": Decimal("0.2"), "ml/default": 1}


def test_the_daemon_is_not_asked_when_no_pod_on_the_node_is_an_mps_client(tmp_path):
    control, asked = daemon(tmp_path, "25.0")
    pods = KubernetesPods(cluster="eks", mps=control, pods_file=pods_file(tmp_path, {"plain": {}}))

    assert [r.gpus for r in pods.describe([seen("ml/plain", 0)], START)] == [1]
    assert not asked.exists()
