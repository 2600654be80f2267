"""dcgm-exporter: scrape its /metrics page (Prometheus text, parsed by prometheus_client) into samples.

Jobs come from the exporter's own labels: `hpc_job` (set by DCGM's HPC job mapping), else the pod it
attributes the GPU to (`namespace/pod`, as the Kubernetes mapper names pods). Every GPU and MIG instance on
the page is sampled with whatever it shows: users trim dcgm-exporter's counters file, and a metric left out
is unknown (null) on the sample, never a reason to drop the GPU. SM activity is the profiling SM_ACTIVE
where collected, else GPU_UTIL, else (MIG instances, which have no GPU_UTIL) GR_ENGINE_ACTIVE.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime

from prometheus_client.parser import text_string_to_metric_families

from collectors.records import Record, SampleRecord
from collectors.sources import SourceConfig

log = logging.getLogger("gpu-collector")
MIB = 1024 * 1024

# metric -> (reading key, factor to the record's unit). PROF ratios are 0-1, record percentages 0-100.
METRICS: dict[str, tuple[str, float]] = {
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active", 100.0),
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util", 1.0),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gr_active", 100.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util", 1.0),
    "DCGM_FI_DEV_FB_USED": ("fb_used", 1.0),
    "DCGM_FI_DEV_FB_FREE": ("fb_free", 1.0),
    "DCGM_FI_DEV_FB_RESERVED": ("fb_reserved", 1.0),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active", 100.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active", 100.0),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("pcie_tx_mibps", 1 / MIB),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("pcie_rx_mibps", 1 / MIB),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": ("nvlink_tx", 1 / MIB),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": ("nvlink_rx", 1 / MIB),
}


@dataclass
class DcgmGpu:
    """One GPU or MIG instance as the page shows it."""

    uuid: str
    index: int
    model: str
    host: str | None
    mig_profile: str | None
    job_id: str | None
    values: dict[str, float] = field(default_factory=dict)


def _job(labels: dict[str, str]) -> str | None:
    if labels.get("hpc_job"):
        return labels["hpc_job"]
    if labels.get("pod"):
        return f"{labels['namespace']}/{labels['pod']}" if labels.get("namespace") else labels["pod"]
    return None


def parse_page(text: str) -> list[DcgmGpu]:
    gpus: dict[tuple[str, str | None], DcgmGpu] = {}
    for family in text_string_to_metric_families(text):
        for metric in family.samples:
            if metric.name not in METRICS or "UUID" not in metric.labels:
                continue
            labels = metric.labels
            instance = labels.get("GPU_I_ID")
            key = (labels["UUID"], instance)
            gpu = gpus.get(key)
            if gpu is None:
                gpu = gpus[key] = DcgmGpu(
                    # MIG instances are GPUs of their own; the exporter names them by parent and instance id.
                    uuid=labels["UUID"] if instance is None else f"{labels['UUID']}/gi{instance}",
                    index=int(labels.get("gpu", 0)),
                    model=labels.get("modelName") or "unknown",
                    host=labels.get("Hostname"),
                    mig_profile=labels.get("GPU_I_PROFILE"),
                    job_id=_job(labels),
                )
            gpu.job_id = gpu.job_id or _job(labels)
            name, factor = METRICS[metric.name]
            gpu.values[name] = metric.value * factor
    return list(gpus.values())


def _percent(value: float | None) -> float | None:
    return None if value is None else min(max(value, 0.0), 100.0)


def sample_of(gpu: DcgmGpu, *, cluster: str, node: str, now: datetime) -> SampleRecord:
    v = gpu.values
    sm = next((v[k] for k in ("sm_active", "gpu_util", "gr_active") if k in v), None)
    used = v.get("fb_used")
    total = used + v["fb_free"] + v.get("fb_reserved", 0.0) if used is not None and "fb_free" in v else None
    nvlink = [v[k] for k in ("nvlink_tx", "nvlink_rx") if k in v]
    return SampleRecord(
        cluster=cluster,
        node=gpu.host or node,
        gpu_uuid=gpu.uuid,
        gpu_index=gpu.index,
        gpu_model=gpu.model,
        ts=now,
        job_id=gpu.job_id,
        sm_util=_percent(sm),
        mem_used_mib=used,
        mem_total_mib=total or None,
        power_w=v.get("power_w"),
        mig_profile=gpu.mig_profile,
        mem_util=_percent(v.get("mem_util")),
        tensor_active=_percent(v.get("tensor_active")),
        dram_active=_percent(v.get("dram_active")),
        pcie_rx_mibps=v.get("pcie_rx_mibps"),
        pcie_tx_mibps=v.get("pcie_tx_mibps"),
        nvlink_mibps=sum(nvlink) if nvlink else None,
    )


class DcgmSource:
    name = "dcgm"

    def __init__(self, *, cluster: str, node: str, url: str, timeout: float = 10.0) -> None:
        self.cluster, self.node, self.url, self.timeout = cluster, node, url, timeout

    @classmethod
    def open(cls, config: SourceConfig) -> DcgmSource:
        return cls(cluster=config.cluster, node=config.node, url=config.dcgm_url)

    def fetch(self) -> str | None:
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout) as response:  # noqa: S310 - operator's URL
                return response.read().decode()
        except (urllib.error.URLError, OSError) as exc:
            log.warning("dcgm: cannot read %s (%s); no samples this round", self.url, exc)
            return None

    def read(self, now: datetime) -> list[Record]:
        text = self.fetch()
        return [] if text is None else self.records(text, now)

    def records(self, text: str, now: datetime) -> list[Record]:
        return [sample_of(gpu, cluster=self.cluster, node=self.node, now=now) for gpu in parse_page(text)]

    def close(self) -> None:
        pass


SOURCE = DcgmSource
