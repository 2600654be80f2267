from datetime import UTC, datetime

import pytest

from collectors.sources.dcgm import DcgmSource, parse_page
from tests.collectors.conftest import fixture_dir

NOW = datetime(2026, 11, 3, 9, 15, tzinfo=UTC)
EKS = "aicr-eks-h100x8_pod-labels_sampled.prom"


def page(name: str) -> str:
    return (fixture_dir("dcgm") / name).read_text()


def test_the_pod_a_gpu_serves_becomes_its_job():
    gpus = parse_page(page(EKS))

    assert len(gpus) == 8
    gpu0 = gpus[0]
    assert (gpu0.uuid, gpu0.model, gpu0.index) == (
        "GPU-c4529c8d-69c4-b61d-e0bc-7b2460096005",
        "NVIDIA H100 80GB HBM3",
        0,
    )
    assert gpu0.job_id == "dynamo-workload/vllm-agg-0-vllmdecodeworker-s65j5"
    assert gpu0.values["power_w"] == pytest.approx(113.611)
    assert [g.job_id for g in gpus[1:]] == [None] * 7


def test_every_gpu_of_the_eks_page_is_sampled_though_it_lacks_sm_activity_and_memory():
    samples = DcgmSource(cluster="c1", node="n1", url="unused").records(page(EKS), NOW)

    assert len(samples) == 8
    gpu0 = samples[0]
    assert (gpu0.gpu_uuid, gpu0.node, gpu0.gpu_model) == (
        "GPU-c4529c8d-69c4-b61d-e0bc-7b2460096005",
        "ip-10-0-171-111.ec2.internal",
        "NVIDIA H100 80GB HBM3",
    )
    assert gpu0.job_id == "dynamo-workload/vllm-agg-0-vllmdecodeworker-s65j5"
    assert (gpu0.sm_util, gpu0.mem_util, gpu0.power_w) == (0.0, 0.0, pytest.approx(113.611))  # GPU_UTIL stands in
    assert (gpu0.mem_used_mib, gpu0.mem_total_mib) == (None, None)  # no FB lines on the page: unknown
    assert [s.job_id for s in samples[1:]] == [None] * 7


def test_a_trimmed_page_still_samples_every_gpu_with_what_it_shows():
    trimmed = "\n".join(line for line in page(EKS).splitlines() if line.startswith("DCGM_FI_DEV_POWER_USAGE"))

    samples = DcgmSource(cluster="c1", node="n1", url="unused").records(trimmed, NOW)

    assert [s.gpu_index for s in samples] == list(range(8))
    assert {(s.sm_util, s.mem_used_mib, s.mem_total_mib, s.mem_util) for s in samples} == {(None, None, None, None)}
    assert all(s.power_w > 60 for s in samples)


def test_sm_activity_from_profiling_wins_over_gpu_util():
    text = (
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1"} 100\n'
        'DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-1"} 0.25\n'
        'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-1"} 100\n'
    )

    (sample,) = DcgmSource(cluster="c1", node="n1", url="unused").records(text, NOW)

    assert (sample.sm_util, sample.mem_used_mib, sample.mem_total_mib) == (25.0, 100.0, None)


def test_a_whole_gpu_and_its_mig_instance_are_both_sampled_with_profiling_metrics():
    source = DcgmSource(cluster="c1", node="n1", url="unused")

    whole, mig = source.records(page("nvidia-docs-a100-mig_excerpt.prom"), NOW)

    assert whole.node == "ub20-a100-k8s" and whole.mig_profile is None
    assert (whole.sm_util, whole.tensor_active, whole.dram_active) == pytest.approx((99.563, 92.926, 69.0789))
    assert (whole.mem_used_mib, whole.mem_total_mib, whole.power_w) == (4845, 4845 + 35690, pytest.approx(409.692))
    assert whole.pcie_rx_mibps == pytest.approx(97863601 / 2**20)
    assert (mig.gpu_uuid, mig.mig_profile, mig.gpu_index) == (
        "GPU-34319582-d595-d1c7-d1d2-179bcfa61660/gi13",
        "1g.5gb",
        0,
    )
    assert (mig.sm_util, mig.tensor_active, mig.dram_active) == pytest.approx((99.5687, 93.0433, 80.0339))
    assert (mig.mem_used_mib, mig.power_w) == (None, None)


def test_the_hpc_job_label_wins_over_the_pod():
    text = 'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-1",hpc_job="4746",pod="p",namespace="ns"} 42\n'

    (gpu,) = parse_page(text)

    assert (gpu.job_id, gpu.values["gpu_util"]) == ("4746", 42.0)


def test_an_unreachable_exporter_gives_an_empty_round_not_a_crash():
    source = DcgmSource(cluster="c1", node="n1", url="http://127.0.0.1:9/metrics", timeout=1)

    assert source.read(NOW) == []
