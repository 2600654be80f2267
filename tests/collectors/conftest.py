from pathlib import Path

import pytest

from collectors.host import Host
from collectors.jobs import build_mapping

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "data" / "fixtures"


def fixture_dir(name: str) -> Path:
    folder = FIXTURES / name
    if not folder.is_dir():
        pytest.skip(f"needs the captures in {folder} (../shared/data/fixtures, present in CI)")
    return folder


class FakeHost:
    """A /proc and /sys tree in tmp_path: two NUMA nodes of 24 CPUs, GPUs by PCI bus id."""

    def __init__(self, root: Path) -> None:
        self.host = Host(proc=root / "proc", sys=root / "sys")
        for node, cpus in ((0, "0-23"), (1, "24-47")):
            self.write(self.host.sys / f"devices/system/node/node{node}/cpulist", cpus + "\n")

    def write(self, path: Path, text: str | bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())

    def gpu(self, bus_id: str, numa_node: int) -> None:
        domain, _, rest = bus_id.lower().partition(":")
        self.write(self.host.sys / "bus/pci/devices" / f"{domain[-4:]}:{rest}" / "numa_node", f"{numa_node}\n")

    def process(self, pid: int, *, env: dict[str, str] | None = None, cgroup: str = "0::/", cpus: str = "0-47") -> None:
        folder = self.host.proc / str(pid)
        self.write(folder / "environ", b"".join(f"{k}={v}".encode() + b"\0" for k, v in (env or {}).items()))
        self.write(folder / "cgroup", cgroup + "\n")
        self.write(folder / "status", f"Name:\tpython\nPid:\t{pid}\nCpus_allowed_list:\t{cpus}\n")

    def mapping(self, names: str = "slurm,kubernetes,label", **options: str):
        return build_mapping(names.split(","), host=self.host, **options)


@pytest.fixture
def fake_host(tmp_path) -> FakeHost:
    return FakeHost(tmp_path / "host")
