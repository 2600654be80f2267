"""A node's GPU topology: how each pair of its GPUs is connected, read once per node and sent to the server.

Two readers: `nvidia-smi topo -m` (its matrix, as the tool prints it) and NVML (the common PCIe ancestor of each
pair, and NVLink where peer-to-peer over NVLink is possible). Both give each pair one of nvidia-smi's link names,
nearest first:

    NV<n>  NVLink (n links; NV: count unknown)  PIX  at most one PCIe bridge    PXB  several PCIe bridges
    PHB    through a PCIe host bridge           NODE across host bridges of one NUMA node
    SYS    across NUMA nodes (the SMP interconnect between sockets)

The report (`TopologyReport`) is what `POST /api/v1/topology/` takes.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any

import msgspec

from collectors.records import ClusterName, Name

ORDER = ("NV", "PIX", "PXB", "PHB", "NODE", "SYS")  # nearest to farthest
FAR = frozenset({"PHB", "NODE", "SYS"})  # through the CPU's host bridge or farther: slow for collectives
SAYS = {
    "NV": "over NVLink",
    "PIX": "through one PCIe switch",
    "PXB": "through several PCIe switches",
    "PHB": "through the CPU's PCIe host bridge",
    "NODE": "across PCIe host bridges of one NUMA node",
    "SYS": "across CPU sockets",
}
LINK = re.compile(r"^(NV\d*|PIX|PXB|PHB|NODE|SYS)$")
MAX_GPUS = 64

Link = Annotated[str, msgspec.Meta(max_length=8)]
PairKey = Annotated[str, msgspec.Meta(pattern=r"^\d{1,2}-\d{1,2}$")]


def kind(link: str) -> str:
    """The link's class: 'NV' for any NVLink count, else the name itself."""
    return "NV" if link.startswith("NV") else link


def rank(link: str) -> int:
    return ORDER.index(kind(link))


class TopologyReport(msgspec.Struct, forbid_unknown_fields=True):
    """One node's topology: `links` maps 'i-j' (GPU indexes, i < j) to the link between them, for every pair."""

    cluster: ClusterName
    node: Name
    gpus: Annotated[int, msgspec.Meta(ge=1, le=MAX_GPUS)]
    links: dict[PairKey, Link]
    source: Annotated[str, msgspec.Meta(pattern=r"^(nvml|nvidia-smi)$")] = "nvml"

    def __post_init__(self) -> None:
        for key, link in sorted(self.links.items()):
            if not LINK.match(link):
                names = "NV#, PIX, PXB, PHB, NODE, SYS"
                raise ValueError(f"links: {key} is {link!r}, not a link nvidia-smi names ({names})")
        expected = {f"{i}-{j}" for i, j in itertools.combinations(range(self.gpus), 2)}
        missing, extra = sorted(expected - set(self.links)), sorted(set(self.links) - expected)
        if extra:
            raise ValueError(f"links: {extra[0]} is no pair i-j (i < j) of GPUs 0 to {self.gpus - 1}")
        if missing:
            raise ValueError(f"links: the pair {missing[0]} is missing (every pair of the {self.gpus} GPUs is needed)")


class Topology:
    """Pairs of GPU indexes and their links; reads a report or a matrix."""

    def __init__(self, gpus: int, links: dict[tuple[int, int], str]) -> None:
        self.gpus = gpus
        self.links = {(min(i, j), max(i, j)): link for (i, j), link in links.items()}

    @classmethod
    def of(cls, gpus: int, links: dict[str, str]) -> Topology:
        pairs = {}
        for key, link in links.items():
            i, _, j = key.partition("-")
            pairs[(int(i), int(j))] = link
        return cls(gpus, pairs)

    def link(self, i: int, j: int) -> str:
        return self.links[(min(i, j), max(i, j))]

    def worst(self, indexes: Iterable[int]) -> str | None:
        """The farthest link between any two of the GPUs; None for fewer than two."""
        pairs = [self.link(i, j) for i, j in itertools.combinations(sorted(set(indexes)), 2)]
        return max(pairs, key=rank) if pairs else None

    def best_set(self, size: int, among: Iterable[int]) -> tuple[tuple[int, ...], str] | None:
        """The `size` GPUs among `among` whose farthest link is nearest (ties: the lowest indexes), with that link."""
        pool = sorted(set(among))
        best: tuple[tuple[int, ...], str] | None = None
        for combo in itertools.combinations(pool, size):
            worst = self.worst(combo)
            if worst is not None and (best is None or rank(worst) < rank(best[1])):
                best = (combo, worst)
                if kind(worst) == "NV":
                    break
        return best

    def report(self, *, cluster: str, node: str, source: str) -> TopologyReport:
        links = {f"{i}-{j}": link for (i, j), link in sorted(self.links.items())}
        return TopologyReport(cluster=cluster, node=node, gpus=self.gpus, links=links, source=source)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def parse_topo_matrix(text: str) -> Topology:
    """`nvidia-smi topo -m`'s matrix: the header names GPU0..GPUn-1 (then NICs and affinities), each GPU row gives
    its link to every column. Raises ValueError naming what it could not read."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    header = next((line for line in lines if re.match(r"^\s+GPU0\b", line)), None)
    if header is None:
        raise ValueError("topo -m: no header line naming GPU0")
    columns = header.split()
    gpus = [c for c in columns if re.fullmatch(r"GPU\d+", c)]
    if gpus != [f"GPU{n}" for n in range(len(gpus))]:
        raise ValueError(f"topo -m: GPU columns {gpus} are not GPU0 to GPU{len(gpus) - 1} in order")
    links: dict[tuple[int, int], str] = {}
    rows = 0
    for line in lines:
        match = re.match(r"^GPU(\d+)\s+(.*)$", line)
        if match is None:
            continue
        i = int(match.group(1))
        cells = match.group(2).split()[: len(gpus)]
        if len(cells) < len(gpus):
            raise ValueError(f"topo -m: row GPU{i} has {len(cells)} of {len(gpus)} GPU columns")
        for j, cell in enumerate(cells):
            if j == i:
                if cell != "X":
                    raise ValueError(f"topo -m: GPU{i} against itself reads {cell!r}, expected X")
                continue
            if not LINK.match(cell):
                raise ValueError(f"topo -m: GPU{i} to GPU{j} reads {cell!r}, not a link nvidia-smi names")
            links[(min(i, j), max(i, j))] = cell
        rows += 1
    if rows != len(gpus):
        raise ValueError(f"topo -m: {rows} GPU rows for {len(gpus)} GPU columns")
    return Topology(len(gpus), links)


def read_nvml(nvml: Any, handles: Sequence[Any]) -> Topology:
    """Each pair from NVML: NVLink where peer-to-peer over NVLink is possible ('NV': behind an NVSwitch the link
    count between two GPUs is not theirs to tell), else the common PCIe ancestor (one or several switches, the
    host bridge, the NUMA node, the system)."""
    levels = {
        nvml.NVML_TOPOLOGY_INTERNAL: "PIX",
        nvml.NVML_TOPOLOGY_SINGLE: "PIX",
        nvml.NVML_TOPOLOGY_MULTIPLE: "PXB",
        nvml.NVML_TOPOLOGY_HOSTBRIDGE: "PHB",
        nvml.NVML_TOPOLOGY_NODE: "NODE",
        nvml.NVML_TOPOLOGY_SYSTEM: "SYS",
    }
    links = {}
    for i, j in itertools.combinations(range(len(handles)), 2):
        a, b = handles[i], handles[j]
        try:
            nvlink = nvml.nvmlDeviceGetP2PStatus(a, b, nvml.NVML_P2P_CAPS_INDEX_NVLINK) == nvml.NVML_P2P_STATUS_OK
        except nvml.NVMLError:
            nvlink = False
        links[(i, j)] = "NV" if nvlink else levels.get(nvml.nvmlDeviceGetTopologyCommonAncestor(a, b), "SYS")
    return Topology(len(handles), links)


TOPOLOGY_PATH = "/api/v1/topology/"


def topology_read(
    spec: str, *, nvml: Any = None, run: Callable[[list[str]], str] | None = None
) -> tuple[Topology, str]:
    """The node's topology from `spec`: 'nvml', 'nvidia-smi' (runs `nvidia-smi topo -m`), or a file holding that
    command's output; with the source name the report carries."""
    if spec == "nvml":
        if nvml is None:
            import pynvml

            nvml = pynvml
        nvml.nvmlInit()
        try:
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
            return read_nvml(nvml, handles), "nvml"
        finally:
            nvml.nvmlShutdown()
    if spec == "nvidia-smi":
        runner = run or _run
        return parse_topo_matrix(runner(["nvidia-smi", "topo", "-m"])), "nvidia-smi"
    return parse_topo_matrix(Path(spec).read_text()), "nvidia-smi"


def _run(argv: list[str]) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30).stdout  # noqa: S603


def topology_send(report: TopologyReport, sender: Any) -> None:
    """POST the report (`Sender.post` retries with backoff; a refusal raises, and the agent goes on sampling)."""
    sender.post(msgspec.json.encode(report), path=TOPOLOGY_PATH)
