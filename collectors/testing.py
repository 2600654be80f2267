"""A fake of pynvml for tests and the benchmark: the same function names, return types and NVMLError
subclasses as the real library, with values taken from real captures (see the fixtures README in
../shared/data/fixtures/nvml/). Importable without pytest; never used by the agent itself.
"""

from __future__ import annotations

import ctypes
import inspect
from dataclasses import dataclass, field
from typing import Any

import pynvml

MIB = 1024 * 1024
NO_INSTANCE = 0xFFFFFFFF  # what NVML puts in gpuInstanceId for a process on a GPU without MIG


@dataclass
class FakeProcess:
    pid: int
    used_mib: int
    gpu_instance: int = NO_INSTANCE
    sm_util: tuple[int, ...] = ()  # the per-process utilisation samples NVML holds for it (% SM), oldest first


@dataclass
class FakeMig:
    uuid: str
    profile: str
    gpu_instance: int
    total_mib: int
    used_mib: int
    gpm: dict[int, float] = field(default_factory=dict)


@dataclass
class FakeGpu:
    uuid: str
    name: str
    bus_id: str
    total_mib: int
    used_mib: int
    util: tuple[int, int] | None  # (gpu %, memory %); None: NotSupported (MIG on)
    power_mw: int
    pcie_kbps: tuple[int, int] | None = None  # (tx, rx); None: NotSupported
    gpm: dict[int, float] | None = None  # metric id -> value; None: no GPM on this GPU
    processes: list[FakeProcess] = field(default_factory=list)
    mig: list[FakeMig | None] | None = None  # slots; None in a slot: empty (NotFound)


@dataclass(frozen=True)
class Handle:
    gpu: FakeGpu
    mig: FakeMig | None = None


def h200(*, uuid: str = "GPU-5c1b0e8a-0000-4000-8000-000000000000", bus_id: str = "00000000:83:00.0") -> FakeGpu:
    """The H200 capture under load: MIG off, 143771 MiB, 100 % busy, three processes."""
    return FakeGpu(
        uuid=uuid, name="NVIDIA H200", bus_id=bus_id, total_mib=143771, used_mib=32362, util=(100, 7),
        power_mw=627320, pcie_kbps=(4217, 8691),
        gpm={
            pynvml.NVML_GPM_METRIC_SM_UTIL: 97.5, pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 0.0,
            pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: 38.2, pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC: 4.1,
            pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC: 8.5,
        },
        processes=[FakeProcess(10291, 2566), FakeProcess(10293, 1542), FakeProcess(10309, 28234)],
    )  # fmt: skip


def h100_mig(*, uuid: str = "GPU-00000000-0000-0000-0000-000000000000") -> FakeGpu:
    """The H100 capture with MIG on: 3g.40gb, 2g.20gb, 2x 1g.10gb; the load runs on GPU instance 2."""
    sm = pynvml.NVML_GPM_METRIC_SM_UTIL
    mig = [
        FakeMig("MIG-00000000-0000-0000-0000-000000000000", "3g.40gb", 2, 40448, 11091, {sm: 96.0}),
        FakeMig("MIG-00000001-0000-0000-0000-000000000001", "2g.20gb", 3, 20096, 17, {sm: 0.0}),
        FakeMig("MIG-00000002-0000-0000-0000-000000000002", "1g.10gb", 9, 9984, 9, {sm: 0.0}),
        FakeMig("MIG-00000003-0000-0000-0000-000000000003", "1g.10gb", 10, 9984, 9, {sm: 0.0}),
    ]
    return FakeGpu(
        uuid=uuid, name="NVIDIA H100 80GB HBM3", bus_id="00000000:00:09.0", total_mib=81559, used_mib=11125,
        util=None, power_mw=432210, pcie_kbps=None, gpm={},
        processes=[FakeProcess(21180, 2296, 2), FakeProcess(21181, 1272, 2), FakeProcess(21198, 7484, 2)],
        mig=[*mig, None, None, None],  # an H100 has 7 MIG slots
    )  # fmt: skip


class FakeNvml:
    """Stands in for the `pynvml` module. Attributes it does not define (errors, constants, structs) are pynvml's."""

    def __init__(
        self, gpus: list[FakeGpu], *, library_found: bool = True, links: dict[tuple[int, int], str] | None = None,
        processes_utilization_info: bool = True,
    ) -> None:  # fmt: skip
        self.gpus = gpus
        # Per-process utilisation: the newer call exists from driver 550 on; the samples' clock (microseconds).
        self.processes_utilization_info = processes_utilization_info
        self.process_clock_us = 1_700_000_000_000_000
        self.library_found = library_found
        self.samples: dict[int, Any] = {}
        self.links = links or {}  # (i, j) -> nvidia-smi's link name, as a `topo -m` matrix gives them

    def _link(self, a: Handle, b: Handle) -> str:
        i, j = sorted((self.gpus.index(a.gpu), self.gpus.index(b.gpu)))
        return self.links[(i, j)]

    def nvmlDeviceGetP2PStatus(self, a: Handle, b: Handle, index: int) -> int:
        if index != pynvml.NVML_P2P_CAPS_INDEX_NVLINK:
            raise pynvml.NVMLError_NotSupported()
        nvlink = self._link(a, b).startswith("NV")
        return pynvml.NVML_P2P_STATUS_OK if nvlink else pynvml.NVML_P2P_STATUS_NOT_SUPPORTED

    def nvmlDeviceGetTopologyCommonAncestor(self, a: Handle, b: Handle) -> int:
        levels = {"PIX": pynvml.NVML_TOPOLOGY_SINGLE, "PXB": pynvml.NVML_TOPOLOGY_MULTIPLE,
                  "PHB": pynvml.NVML_TOPOLOGY_HOSTBRIDGE, "NODE": pynvml.NVML_TOPOLOGY_NODE}  # fmt: skip
        return levels.get(self._link(a, b), pynvml.NVML_TOPOLOGY_SYSTEM)  # an NVLink pair: its PCIe path says SYS

    def __getattr__(self, name: str) -> Any:
        if name.startswith(("NVML", "c_nvml", "nvmlFriendlyObject")):
            return getattr(pynvml, name)
        raise AttributeError(name)

    def nvmlInit(self) -> None:
        if not self.library_found:
            raise pynvml.NVMLError_LibraryNotFound()

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Handle:
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError_InvalidArgument()
        return Handle(self.gpus[index])

    def nvmlDeviceGetUUID(self, handle: Handle) -> str:
        return handle.mig.uuid if handle.mig else handle.gpu.uuid

    def nvmlDeviceGetName(self, handle: Handle) -> str:
        return f"{handle.gpu.name} MIG {handle.mig.profile}" if handle.mig else handle.gpu.name

    def nvmlDeviceGetPciInfo(self, handle: Handle) -> Any:
        info = pynvml.nvmlPciInfo_t()
        info.busId = handle.gpu.bus_id.encode()
        info.busIdLegacy = handle.gpu.bus_id[4:].encode()
        return info

    def nvmlDeviceGetNumaNodeId(self, handle: Handle) -> int:
        raise pynvml.NVMLError_NotSupported()  # PCIe GPUs: "GPU NUMA ID N/A" in the captures

    def nvmlDeviceGetMemoryInfo(self, handle: Handle) -> Any:
        total, used = (
            (handle.mig.total_mib, handle.mig.used_mib) if handle.mig else (handle.gpu.total_mib, handle.gpu.used_mib)
        )
        return pynvml.c_nvmlMemory_t(total=total * MIB, free=(total - used) * MIB, used=used * MIB)

    def nvmlDeviceGetUtilizationRates(self, handle: Handle) -> Any:
        if handle.mig or handle.gpu.util is None:
            raise pynvml.NVMLError_NotSupported()
        return pynvml.c_nvmlUtilization_t(gpu=handle.gpu.util[0], memory=handle.gpu.util[1])

    def nvmlDeviceGetPowerUsage(self, handle: Handle) -> int:
        if handle.mig:
            raise pynvml.NVMLError_NotSupported()
        return handle.gpu.power_mw

    def nvmlDeviceGetPcieThroughput(self, handle: Handle, counter: int) -> int:
        if handle.gpu.pcie_kbps is None:
            raise pynvml.NVMLError_NotSupported()
        return handle.gpu.pcie_kbps[0 if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES else 1]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Handle) -> list[Any]:
        return [
            pynvml.nvmlFriendlyObject(
                {"pid": p.pid, "usedGpuMemory": p.used_mib * MIB, "gpuInstanceId": p.gpu_instance,
                 "computeInstanceId": 0 if p.gpu_instance != NO_INSTANCE else NO_INSTANCE}
            )
            for p in handle.gpu.processes
            if handle.mig is None or p.gpu_instance == handle.mig.gpu_instance
        ]  # fmt: skip

    def _process_samples(self, handle: Handle, since: int, kind: Any) -> list[Any]:
        """NVML's per-process utilisation samples newer than `since` (microseconds), one per process and value;
        NotFound where it holds none (as the driver answers), NotSupported under MIG."""
        if handle.mig is not None:
            raise pynvml.NVMLError_NotSupported()
        out = [
            kind(pid=p.pid, timeStamp=self.process_clock_us + n, smUtil=sm, memUtil=0, encUtil=0, decUtil=0)
            for p in handle.gpu.processes
            for n, sm in enumerate(p.sm_util, start=1)
            if self.process_clock_us + n > since
        ]
        if not out:
            raise pynvml.NVMLError_NotFound()
        return out

    def nvmlDeviceGetProcessUtilization(self, handle: Handle, timeStamp: int) -> list[Any]:
        return self._process_samples(handle, timeStamp, pynvml.c_nvmlProcessUtilizationSample_t)

    def nvmlDeviceGetProcessesUtilizationInfo(self, handle: Handle, timeStamp: int) -> list[Any]:
        if not self.processes_utilization_info:
            raise pynvml.NVMLError_FunctionNotFound()  # a driver before 550
        return self._process_samples(handle, timeStamp, pynvml.c_nvmlProcessUtilizationInfo_v1_t)

    def nvmlDeviceGetMigMode(self, handle: Handle) -> list[int]:
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if handle.gpu.mig is not None else pynvml.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Handle) -> int:
        return len(handle.gpu.mig or [])

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Handle, index: int) -> Handle:
        slots = handle.gpu.mig or []
        if index >= len(slots):
            raise pynvml.NVMLError_InvalidArgument()
        if slots[index] is None:
            raise pynvml.NVMLError_NotFound()
        return Handle(handle.gpu, slots[index])

    def nvmlDeviceGetGpuInstanceId(self, handle: Handle) -> int:
        if handle.mig is None:
            raise pynvml.NVMLError_InvalidArgument()
        return handle.mig.gpu_instance

    def nvmlGpmQueryDeviceSupport(self, handle: Handle) -> Any:
        support = pynvml.c_nvmlGpmSupport_t()
        support.version = pynvml.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = int(handle.gpu.gpm is not None)
        return support

    def nvmlGpmSampleAlloc(self) -> Any:
        return pynvml.c_nvmlGpmSample_t(pynvml.struct_c_nvmlGpmSample_t())

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        self.samples.pop(ctypes.addressof(sample.contents), None)

    def nvmlGpmSampleGet(self, handle: Handle, sample: Any) -> Any:
        if handle.gpu.gpm is None:
            raise pynvml.NVMLError_NotSupported()
        self.samples[ctypes.addressof(sample.contents)] = handle.gpu.gpm
        return sample

    def nvmlGpmMigSampleGet(self, handle: Handle, gpu_instance: int, sample: Any) -> Any:
        mig = next((m for m in handle.gpu.mig or [] if m and m.gpu_instance == gpu_instance), None)
        if handle.gpu.gpm is None or mig is None:
            raise pynvml.NVMLError_NotSupported() if mig else pynvml.NVMLError_NotFound()
        self.samples[ctypes.addressof(sample.contents)] = mig.gpm
        return sample

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        values = self.samples[ctypes.addressof(request.sample2.contents)]
        for slot in range(request.numMetrics):
            metric = request.metrics[slot]
            if metric.metricId in values:
                metric.value, metric.nvmlReturn = values[metric.metricId], pynvml.NVML_SUCCESS
            else:
                metric.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return request


class RecordingNvml:
    """Wraps an NVML module and keeps every call it forwards, so the calls alone can be replayed and timed."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self.calls: list[tuple[Any, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._nvml, name)
        if not (inspect.ismethod(attr) or inspect.isfunction(attr)):
            return attr

        def call(*args: Any) -> Any:
            self.calls.append((attr, args))
            return attr(*args)

        return call
