"""NVML (pynvml): every GPU of the node, each MIG instance as a GPU of its own, processes mapped to jobs.

A GPU whose processes belong to several jobs (time-slicing, MPS) is split by process where NVML can
(nvmlDeviceGetProcessesUtilizationInfo, or nvmlDeviceGetProcessUtilization on drivers before 550): its samples
name the jobs in turn, each carrying its own processes' SM in job_sm_util beside the GPU's in sm_util. Where NVML
cannot, the sample names the job holding most of the GPU's memory, as for a GPU one job holds.

What a GPU does not support (utilisation under MIG, GPM before Hopper, PCIe counters on some boards)
raises NVMLError_NotSupported; that field is sent as unknown (null), never guessed, and the GPU is still
sampled. A MIG slot that holds no instance raises NVMLError_NotFound. A process that exits between NVML
listing it and /proc being read maps to no job and takes nothing else down.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from collectors.host import Host
from collectors.jobs import JobMapping
from collectors.records import Record, SampleRecord
from collectors.sources import SourceConfig, SourceUnavailable
from collectors.sources.gpm import Gpm

log = logging.getLogger("gpu-collector")

# pynvml, or a stand-in with its functions and constants (collectors.testing); pynvml ships no types.
Nvml = Any

MIB = 1024 * 1024
T = TypeVar("T")


@dataclass(frozen=True)
class GpuFacts:
    """What does not change while the node runs: read once per GPU."""

    uuid: str
    name: str
    bus_id: str
    numa_node: int | None


@dataclass
class Reading:
    sm_util: float | None
    mem_util: float | None
    mem_used_mib: float
    mem_total_mib: float
    power_w: float | None
    pcie_rx_mibps: float | None
    pcie_tx_mibps: float | None
    gpm: dict[str, float]


def mig_profile(mig_name: str) -> str | None:
    """NVML names a MIG device 'NVIDIA H100 80GB HBM3 MIG 3g.40gb'; the profile is what follows 'MIG'."""
    _, sep, profile = mig_name.rpartition("MIG ")
    return profile.strip() or None if sep else None


class NvmlSource:
    name = "nvml"

    def __init__(self, *, cluster: str, node: str, mapping: JobMapping, host: Host, nvml: Nvml) -> None:
        self.cluster, self.node, self.mapping, self.host, self.nvml = cluster, node, mapping, host, nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            raise SourceUnavailable(
                f"nvml: cannot initialise NVML ({exc}); run on a node with the NVIDIA driver, "
                "or use --source dcgm or --source simulate"
            ) from None
        self.gpm = Gpm(nvml)
        self.facts: dict[int, GpuFacts] = {}
        self.warned: set[str] = set()
        # Per shared GPU: how many of its samples went out (jobs take turns), the newest per-process sample read.
        self.turns: dict[str, int] = {}
        self.process_seen: dict[str, int] = {}
        self.processes_info = True  # nvmlDeviceGetProcessesUtilizationInfo answers (else the older call)

    @classmethod
    def open(cls, config: SourceConfig, nvml: Nvml | None = None) -> NvmlSource:
        if nvml is None:
            import pynvml

            nvml = pynvml
        return cls(cluster=config.cluster, node=config.node, mapping=config.mapping, host=config.host, nvml=nvml)

    def close(self) -> None:
        self.gpm.free()
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass

    def optional(self, call: Callable[..., T], *args: Any) -> T | None:
        try:
            return call(*args)
        except (self.nvml.NVMLError_NotSupported, self.nvml.NVMLError_NoData, self.nvml.NVMLError_NoPermission):
            return None

    def _facts(self, index: int, handle: Any) -> GpuFacts:
        if index not in self.facts:
            nvml = self.nvml
            bus_id = nvml.nvmlDeviceGetPciInfo(handle).busId
            bus_id = bus_id.decode() if isinstance(bus_id, bytes) else bus_id
            numa = self.host.pci_numa_node(bus_id)
            if numa is None:
                numa = self.optional(nvml.nvmlDeviceGetNumaNodeId, handle)
            self.facts[index] = GpuFacts(
                uuid=nvml.nvmlDeviceGetUUID(handle),
                name=nvml.nvmlDeviceGetName(handle),
                bus_id=bus_id,
                numa_node=numa if numa is not None and numa >= 0 else None,
            )
        return self.facts[index]

    def read(self, now: datetime) -> list[Record]:
        nvml = self.nvml
        records: list[Record] = []
        for index in range(nvml.nvmlDeviceGetCount()):
            try:
                records.extend(self._read_gpu(index, now))
            except (nvml.NVMLError_GpuIsLost, nvml.NVMLError_Unknown) as exc:
                log.warning("nvml: GPU %s could not be read (%s); its sample is missing this round", index, exc)
        self.mapping.end_round()
        return records

    def _read_gpu(self, index: int, now: datetime) -> list[SampleRecord]:
        nvml = self.nvml
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        facts = self._facts(index, handle)
        processes = self.optional(nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
        mode = self.optional(nvml.nvmlDeviceGetMigMode, handle)
        if mode is not None and mode[0] == nvml.NVML_DEVICE_MIG_ENABLE:
            return self._read_mig(index, handle, facts, processes, now)
        reading = self._reading(handle, facts.uuid)
        job_sm = None
        by_job = self._by_job(processes)
        if len(by_job) > 1 and (own := self._own_sm(handle, facts.uuid, by_job)) is not None:
            # A GPU several jobs share: its samples name them in turn, each with its own processes' SM.
            jobs = sorted(by_job)
            job = jobs[self.turns.get(facts.uuid, 0) % len(jobs)]
            self.turns[facts.uuid] = self.turns.get(facts.uuid, 0) + 1
            processes, job_sm = [p for p in processes if p.pid in by_job[job]], own[job]
        sample = self._sample(index, facts.uuid, facts, None, reading, processes, now, job_sm)
        return [sample] if sample else []

    def _by_job(self, processes: list) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for process in processes:
            job, _ = self.mapping.resolve(process.pid)
            if job is not None:
                out.setdefault(job, set()).add(process.pid)
        return out

    def _process_utilisation(self, handle: Any, since: int) -> list | None:
        """NVML's per-process samples newer than `since`: nvmlDeviceGetProcessesUtilizationInfo (driver 550 on),
        else nvmlDeviceGetProcessUtilization; None where neither answers (no samples, not supported)."""
        nvml = self.nvml
        if self.processes_info:
            try:
                return list(nvml.nvmlDeviceGetProcessesUtilizationInfo(handle, since))
            except (nvml.NVMLError_FunctionNotFound, nvml.NVMLError_NotSupported):
                self.processes_info = False
            except nvml.NVMLError:
                return None
        try:
            return list(nvml.nvmlDeviceGetProcessUtilization(handle, since))
        except nvml.NVMLError:
            return None

    def _own_sm(self, handle: Any, uuid: str, by_job: dict[str, set[int]]) -> dict[str, float] | None:
        """Each job's own SM on a shared GPU: the sum over its processes of their mean SM in NVML's per-process
        samples since the last round's; a job none of whose processes has a sample ran no kernel (0). None where
        NVML cannot split the GPU by process."""
        rows = self._process_utilisation(handle, self.process_seen.get(uuid, 0))
        if not rows:
            return None
        self.process_seen[uuid] = max(r.timeStamp for r in rows)
        per_pid: dict[int, list[int]] = {}
        for r in rows:
            per_pid.setdefault(r.pid, []).append(r.smUtil)
        means = {pid: sum(v) / len(v) for pid, v in per_pid.items()}
        return {job: min(100.0, float(sum(means.get(pid, 0.0) for pid in pids))) for job, pids in by_job.items()}

    def _read_mig(self, index: int, parent: Any, facts: GpuFacts, processes: list, now: datetime) -> list:
        nvml = self.nvml
        samples = []
        for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(parent)):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, slot)
            except nvml.NVMLError_NotFound:
                continue  # an empty slot
            uuid = nvml.nvmlDeviceGetUUID(mig)
            instance = nvml.nvmlDeviceGetGpuInstanceId(mig)
            reading = self._reading(mig, uuid, parent=parent, instance=instance)
            mine = [p for p in processes if p.gpuInstanceId == instance]
            profile = mig_profile(nvml.nvmlDeviceGetName(mig))
            if sample := self._sample(index, uuid, facts, profile, reading, mine, now):
                samples.append(sample)
        return samples

    def _reading(self, handle: Any, key: str, parent: Any = None, instance: int | None = None) -> Reading:
        nvml = self.nvml
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        rates = self.optional(nvml.nvmlDeviceGetUtilizationRates, handle)
        power = None if parent is not None else self.optional(nvml.nvmlDeviceGetPowerUsage, handle)
        gpm = self.gpm.read(key, parent if parent is not None else handle, instance)
        pcie_tx = gpm.pop("pcie_tx_mibps", None)
        pcie_rx = gpm.pop("pcie_rx_mibps", None)
        if parent is None and pcie_tx is None:
            # KB/s over NVML's last 20 ms window; the GPM counters, where present, cover the whole interval.
            tx = self.optional(nvml.nvmlDeviceGetPcieThroughput, handle, nvml.NVML_PCIE_UTIL_TX_BYTES)
            rx = self.optional(nvml.nvmlDeviceGetPcieThroughput, handle, nvml.NVML_PCIE_UTIL_RX_BYTES)
            pcie_tx, pcie_rx = (None if tx is None else tx / 1024), (None if rx is None else rx / 1024)
        sm_util: float | None
        if rates is not None:
            sm_util = float(rates.gpu)
        else:
            sm_util = gpm.pop("sm_util", None)
        return Reading(
            sm_util=sm_util,
            mem_util=float(rates.memory) if rates is not None else None,
            mem_used_mib=memory.used / MIB,
            mem_total_mib=memory.total / MIB,
            power_w=None if power is None else power / 1000,
            pcie_rx_mibps=pcie_rx,
            pcie_tx_mibps=pcie_tx,
            gpm=gpm,
        )

    def _sample(
        self, index: int, uuid: str, facts: GpuFacts, profile: str | None, reading: Reading, processes: list,
        now: datetime, job_sm: float | None = None,
    ) -> SampleRecord | None:  # fmt: skip
        if reading.sm_util is None and uuid not in self.warned:
            self.warned.add(uuid)
            log.warning("nvml: %s reports no SM utilisation (no GPM on this GPU?); its SM is sent as unknown", uuid)
        job_id, cpu_nodes = self._job(processes)
        return SampleRecord(
            cluster=self.cluster,
            node=self.node,
            gpu_uuid=uuid,
            gpu_index=index,
            gpu_model=facts.name,
            ts=now,
            job_id=job_id,
            sm_util=None if reading.sm_util is None else min(reading.sm_util, 100.0),
            mem_used_mib=round(min(reading.mem_used_mib, reading.mem_total_mib), 1),
            mem_total_mib=round(reading.mem_total_mib, 1),
            power_w=reading.power_w,
            gpu_numa_node=facts.numa_node,
            job_cpu_numa_nodes=cpu_nodes,
            mig_profile=profile,
            mem_util=reading.mem_util,
            tensor_active=reading.gpm.get("tensor_active"),
            dram_active=reading.gpm.get("dram_active"),
            pcie_rx_mibps=reading.pcie_rx_mibps,
            pcie_tx_mibps=reading.pcie_tx_mibps,
            nvlink_mibps=reading.gpm.get("nvlink_mibps"),
            job_sm_util=job_sm,
        )

    def _job(self, processes: list) -> tuple[str | None, list[int] | None]:
        """The job holding most of the GPU's memory, and the NUMA nodes its processes' CPUs may use."""
        memory: dict[str, int] = {}
        nodes: dict[str, set[int]] = {}
        for process in processes:
            job, cpu_nodes = self.mapping.resolve(process.pid)
            if job is None:
                continue
            memory[job] = memory.get(job, 0) + (process.usedGpuMemory or 0)
            nodes.setdefault(job, set()).update(cpu_nodes or ())
        if not memory:
            return None, None
        job = max(memory, key=lambda j: (memory[j], j))
        return job, sorted(nodes[job]) or None


SOURCE = NvmlSource
