"""GPM (Hopper and later): activity over the interval between two samples of the GPU's counters.

A metric is the difference of two samples, so the first round after start has none; MIG instances are
sampled through their parent with the instance id. Devices without GPM are remembered and skipped.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

# record field -> (GPM metric names; summed). Percentages stay 0-100; throughputs are MiB/s.
METRICS: dict[str, tuple[str, ...]] = {
    "sm_util": ("NVML_GPM_METRIC_SM_UTIL",),
    "tensor_active": ("NVML_GPM_METRIC_ANY_TENSOR_UTIL",),
    "dram_active": ("NVML_GPM_METRIC_DRAM_BW_UTIL",),
    "pcie_tx_mibps": ("NVML_GPM_METRIC_PCIE_TX_PER_SEC",),
    "pcie_rx_mibps": ("NVML_GPM_METRIC_PCIE_RX_PER_SEC",),
    "nvlink_mibps": ("NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", "NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC"),
}


class Gpm:
    def __init__(self, nvml: ModuleType) -> None:
        self.nvml = nvml
        self.supported: dict[str, bool] = {}
        self.previous: dict[str, Any] = {}
        self.spare: list[Any] = []
        self.ids = [(field, getattr(nvml, name)) for field, names in METRICS.items() for name in names]

    def _supports(self, key: str, device: Any) -> bool:
        if key not in self.supported:
            try:
                self.supported[key] = bool(self.nvml.nvmlGpmQueryDeviceSupport(device).isSupportedDevice)
            except (self.nvml.NVMLError_NotSupported, self.nvml.NVMLError_FunctionNotFound):
                self.supported[key] = False
        return self.supported[key]

    def read(self, key: str, device: Any, instance: int | None = None) -> dict[str, float]:
        """Metrics of `key` (a GPU or MIG uuid) since the last call for it; empty where not supported."""
        nvml = self.nvml
        if not self._supports(key, device):
            return {}
        sample = self.spare.pop() if self.spare else nvml.nvmlGpmSampleAlloc()
        try:
            if instance is None:
                nvml.nvmlGpmSampleGet(device, sample)
            else:
                nvml.nvmlGpmMigSampleGet(device, instance, sample)
        except nvml.NVMLError_NotSupported:
            self.spare.append(sample)
            return {}
        previous, self.previous[key] = self.previous.get(key), sample
        if previous is None:
            return {}
        try:
            return self._metrics(previous, sample)
        finally:
            self.spare.append(previous)

    def _metrics(self, first: Any, second: Any) -> dict[str, float]:
        nvml = self.nvml
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(self.ids)
        request.sample1, request.sample2 = first, second
        for slot, (_, metric_id) in enumerate(self.ids):
            request.metrics[slot].metricId = metric_id
        nvml.nvmlGpmMetricsGet(request)
        values: dict[str, float] = {}
        for slot, (field, _) in enumerate(self.ids):
            metric = request.metrics[slot]
            if metric.nvmlReturn == nvml.NVML_SUCCESS:
                values[field] = values.get(field, 0.0) + float(metric.value)
        return values

    def free(self) -> None:
        for sample in [*self.previous.values(), *self.spare]:
            try:
                self.nvml.nvmlGpmSampleFree(sample)
            except self.nvml.NVMLError:
                pass
        self.previous.clear()
        self.spare.clear()
