"""What the node's /proc and /sys say about a process and a device (roots are parameters, for tests)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path


def parse_cpu_list(text: str) -> set[int]:
    """'0-3,8,10-11' -> {0, 1, 2, 3, 8, 10, 11} (the kernel's cpulist format)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


@dataclass(frozen=True)
class Host:
    proc: Path = Path("/proc")
    sys: Path = Path("/sys")

    def _read(self, path: Path) -> str | None:
        # A process can exit between NVML listing it and us reading it; that is normal, not an error.
        try:
            return path.read_text(errors="replace")
        except (FileNotFoundError, ProcessLookupError, PermissionError, NotADirectoryError):
            return None

    def environ(self, pid: int) -> dict[str, str]:
        try:
            raw = (self.proc / str(pid) / "environ").read_bytes()
        except (FileNotFoundError, ProcessLookupError, PermissionError, NotADirectoryError):
            return {}
        pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
        return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}

    def cgroup(self, pid: int) -> list[str]:
        """The cgroup paths of a process (v1 has one line per controller, v2 one line)."""
        text = self._read(self.proc / str(pid) / "cgroup") or ""
        return [line.split(":", 2)[2] for line in text.splitlines() if line.count(":") >= 2]

    def cpus_allowed(self, pid: int) -> set[int] | None:
        text = self._read(self.proc / str(pid) / "status")
        if text is None:
            return None
        for line in text.splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return parse_cpu_list(line.partition(":")[2])
        return None

    @cache  # noqa: B019 - the NUMA layout of a node does not change while it runs; a Host lives as long as the agent
    def numa_cpus(self) -> dict[int, set[int]]:
        nodes: dict[int, set[int]] = {}
        for path in sorted((self.sys / "devices/system/node").glob("node[0-9]*")):
            text = self._read(path / "cpulist")
            if text is not None:
                nodes[int(path.name.removeprefix("node"))] = parse_cpu_list(text)
        return nodes

    def numa_nodes_of(self, cpus: set[int]) -> list[int]:
        return sorted(node for node, node_cpus in self.numa_cpus().items() if node_cpus & cpus)

    def pci_numa_node(self, bus_id: str) -> int | None:
        """NVML says '00000000:17:00.0'; sysfs names it '0000:17:00.0'. -1 there means no NUMA affinity."""
        domain, _, rest = bus_id.lower().partition(":")
        text = self._read(self.sys / "bus/pci/devices" / f"{domain[-4:]}:{rest}" / "numa_node")
        if text is None:
            return None
        node = int(text.strip())
        return node if node >= 0 else None
