"""A node's GPU topology: nvidia-smi's matrix and NVML read alike, every fixture through the report contract."""

from pathlib import Path

import msgspec
import pytest

from collectors.testing import FakeNvml, h200
from collectors.topology import TopologyReport, parse_topo_matrix, read_nvml, topology_read

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "topology"


def matrix(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.txt")), ids=lambda p: p.stem)
def test_every_matrix_in_the_fixtures_reads_into_a_report_the_api_takes(path):
    topology = parse_topo_matrix(path.read_text())
    report = topology.report(cluster="c1", node="n1", source="nvidia-smi")

    again = msgspec.json.decode(msgspec.json.encode(report), type=TopologyReport)

    assert topology.gpus == 8 and len(report.links) == 28
    assert again == report


def test_the_nvlink_node_links_every_pair_and_the_pcie_node_crosses_sockets():
    dgx = parse_topo_matrix(matrix("dgx-h100-8gpu-nvlink.txt"))
    pcie = parse_topo_matrix(matrix("pcie-l40s-8gpu-2socket.txt"))

    assert set(dgx.links.values()) == {"NV18"}
    assert (pcie.link(0, 1), pcie.link(0, 2), pcie.link(0, 4), pcie.link(7, 3)) == ("PIX", "NODE", "SYS", "SYS")
    assert pcie.worst([0, 1, 2]) == "NODE"
    assert pcie.best_set(2, [0, 2, 4, 5]) == ((4, 5), "PIX")


def test_the_bridged_node_prefers_an_nvlink_pair_to_a_pcie_one():
    bridged = parse_topo_matrix(matrix("pcie-a100-8gpu-nvlink-bridges.txt"))

    assert bridged.best_set(2, range(8)) == ((0, 1), "NV12")
    assert bridged.best_set(2, [1, 2, 3]) == ((2, 3), "NV12")
    assert bridged.best_set(4, [0, 1, 2, 3])[1] == "NODE"


def test_nvml_reads_the_same_links_as_the_matrix_nvlink_counts_aside():
    expected = parse_topo_matrix(matrix("pcie-a100-8gpu-nvlink-bridges.txt"))
    gpus = [h200(uuid=f"GPU-{n}", bus_id=f"00000000:{n:02x}:00.0") for n in range(8)]
    nvml = FakeNvml(gpus, links=expected.links)

    read, source = topology_read("nvml", nvml=nvml)

    assert source == "nvml"
    assert read.links == {pair: ("NV" if link.startswith("NV") else link) for pair, link in expected.links.items()}
    assert read_nvml(nvml, [nvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 4)]).links == {(0, 1): "SYS"}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("nothing here", "no header line naming GPU0"),
        ("\tGPU0\tGPU1\nGPU0\t X \tWAT\nGPU1\tNV4\t X \n", "GPU0 to GPU1 reads 'WAT'"),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV4\n", "1 GPU rows for 2 GPU columns"),
    ],
)
def test_a_matrix_it_cannot_read_is_refused_saying_what(text, says):
    with pytest.raises(ValueError, match=says):
        parse_topo_matrix(text)


def test_cells_past_the_gpu_columns_are_nics_and_affinities_and_colour_codes_are_dropped():
    text = "\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\x1b[0m\nGPU0\t X \tNV4\tPIX\t0-7\nGPU1\tNV4\t X \tSYS\t0-7\n"

    assert parse_topo_matrix(text).links == {(0, 1): "NV4"}


def test_a_report_missing_a_pair_or_naming_an_unknown_link_is_refused_naming_it():
    base = {"cluster": "c1", "node": "n1", "gpus": 3, "links": {"0-1": "NV4", "0-2": "SYS", "1-2": "SYS"}}

    missing = {**base, "links": {"0-1": "NV4", "0-2": "SYS"}}
    unknown = {**base, "links": {**base["links"], "1-2": "FAST"}}
    beyond = {**base, "links": {**base["links"], "2-3": "SYS"}}

    msgspec.json.decode(msgspec.json.encode(base), type=TopologyReport)
    with pytest.raises(msgspec.ValidationError, match="links: the pair 1-2 is missing"):
        msgspec.json.decode(msgspec.json.encode(missing), type=TopologyReport)
    with pytest.raises(msgspec.ValidationError, match="links: 1-2 is 'FAST', not a link"):
        msgspec.json.decode(msgspec.json.encode(unknown), type=TopologyReport)
    with pytest.raises(msgspec.ValidationError, match="links: 2-3 is no pair"):
        msgspec.json.decode(msgspec.json.encode(beyond), type=TopologyReport)
