"""A pod's share of one GPU from its spec (HAMi, gpushare, Run:ai), and through the pods file to its job record."""

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from collectors.pods import KubernetesPods
from collectors.records import SampleRecord
from collectors.requests import requested_share

H100_MIB = 81559
START = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)
GPU = "GPU-bc5610b9-79c8-fedd-8899-07539c7f868a"


@pytest.mark.parametrize(
    ("pod", "share"),
    [
        ({"annotations": {"gpu-fraction": "0.5"}}, Decimal("0.5")),
        ({"requests": {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30"}}, Decimal("0.3")),
        ({"requests": {"nvidia.com/gpu": "2", "nvidia.com/gpucores": "30"}}, Decimal("0.6")),
        ({"requests": {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "25"}}, Decimal("0.25")),
        ({"requests": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20389"}}, Decimal("0.249990")),
        ({"requests": {"aliyun.com/gpu-mem": "40"}}, Decimal("0.502213")),
    ],
)
def test_a_share_the_spec_asks_for_is_the_pods_gpus(pod, share):
    assert requested_share(pod, H100_MIB) == share


@pytest.mark.parametrize(
    "pod",
    [
        {},
        {"annotations": {"gpu-fraction": "1.5"}},  # more than a GPU: not a fraction of one
        {"annotations": {"gpu-fraction": "half"}},
        {"requests": {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100"}},  # the whole GPU, as the ids say
        {"requests": {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "-5"}},
        {"requests": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20389"}, "_memory": None},
        {"requests": {"nvidia.com/gpu": "0.5", "nvidia.com/gpucores": "30"}},
    ],
)
def test_a_spec_that_names_no_share_or_a_bad_one_says_nothing(pod):
    memory = None if "_memory" in pod else H100_MIB
    assert requested_share(pod, memory) is None


def test_a_hami_pod_in_the_pods_file_is_recorded_with_its_share_of_the_gpu_it_is_seen_on(tmp_path):
    pods_file = tmp_path / "pods.json"
    pods_file.write_text(json.dumps({"0f1e2d3c-0000-4000-8000-000000000000": {
        "namespace": "ml", "name": "infer-0", "requests": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "40779"},
    }}))  # fmt: skip
    pods = KubernetesPods(cluster="eks", pods_file=str(pods_file))
    sample = SampleRecord(cluster="eks", node="n", gpu_uuid=GPU, gpu_index=0, gpu_model="m", ts=START,
                          job_id="ml/infer-0", mem_total_mib=H100_MIB)  # fmt: skip
    other = SampleRecord(cluster="eks", node="n", gpu_uuid=GPU, gpu_index=0, gpu_model="m", ts=START,
                         job_id="ml/no-spec", mem_total_mib=H100_MIB)  # fmt: skip

    jobs = {j.job_id: j.gpus for j in pods.describe([sample, other], START)}

    assert jobs == {"ml/infer-0": Decimal("0.499993"), "ml/no-spec": 1}
