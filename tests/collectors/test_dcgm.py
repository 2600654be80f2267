from datetime import UTC, datetime

import pytest

from collectors.sources.dcgm import DcgmSource, parse_page
from tests.collectors.conftest import fixture_dir

NOW = datetime(2026, 11, 3, 9, 15, tzinfo=UTC)


def page(name: str) -> str:
    return (fixture_dir("dcgm") / name).read_text()


def test_the_pod_a_gpu_serves_becomes_its_job():
    gpus = parse_page(page("aicr-eks-h100x8_pod-labels_sampled.prom"))

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


def test_a_page_without_memory_figures_gives_no_samples_rather_than_guessed_ones():
    source = DcgmSource(cluster="c1", node="n1", url="unused")

    assert source.records(page("aicr-eks-h100x8_pod-labels_sampled.prom"), NOW) == []


def test_a_whole_gpu_and_its_mig_instance_are_read_with_profiling_metrics():
    source = DcgmSource(cluster="c1", node="n1", url="unused")
    text = page("nvidia-docs-a100-mig_excerpt.prom")

    (whole,) = source.records(text, NOW)
    mig = [g for g in parse_page(text) if g.mig_profile]

    assert whole.node == "ub20-a100-k8s" and whole.mig_profile is None
    assert (whole.sm_util, whole.tensor_active, whole.dram_active) == pytest.approx((99.563, 92.926, 69.0789))
    assert (whole.mem_used_mib, whole.mem_total_mib, whole.power_w) == (4845, 4845 + 35690, pytest.approx(409.692))
    assert whole.pcie_rx_mibps == pytest.approx(97863601 / 2**20)
    assert [(g.mig_profile, g.uuid) for g in mig] == [("1g.5gb", "GPU-34319582-d595-d1c7-d1d2-179bcfa61660/gi13")]


def test_the_hpc_job_label_wins_over_the_pod():
    text = 'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-1",hpc_job="4746",pod="p",namespace="ns"} 42\n'

    (gpu,) = parse_page(text)

    assert (gpu.job_id, gpu.values["gpu_util"]) == ("4746", 42.0)


def test_an_unreachable_exporter_gives_an_empty_round_not_a_crash():
    source = DcgmSource(cluster="c1", node="n1", url="http://127.0.0.1:9/metrics", timeout=1)

    assert source.read(NOW) == []
