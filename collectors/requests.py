"""A pod's share of one GPU as its own spec asks for it, where the device plugin hands out fractions the kubelet's
device ids do not show: HAMi's `nvidia.com/gpucores` (percent of the GPU's SMs), `nvidia.com/gpumem-percentage`
and `nvidia.com/gpumem` (MiB of the GPU's memory), Alibaba's gpushare `aliyun.com/gpu-mem` (GiB), and Run:ai's
`gpu-fraction` annotation. The pods file gives them per pod: `requests` (its containers' GPU resources, summed) and
`annotations`. Unknown, malformed or out-of-range values say nothing (None), never a guess.
"""

from __future__ import annotations

from decimal import ROUND_DOWN, Decimal, InvalidOperation
from typing import Any

from collectors.records import GPUS_QUANTUM

RUNAI_FRACTION = "gpu-fraction"
HAMI_CORES = "nvidia.com/gpucores"
HAMI_MEM_PERCENT = "nvidia.com/gpumem-percentage"
HAMI_MEM = "nvidia.com/gpumem"
ALIYUN_MEM = "aliyun.com/gpu-mem"
GPU_COUNT = "nvidia.com/gpu"
MIB_PER_GIB = 1024


def _number(value: Any) -> Decimal | None:
    try:
        number = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() and number > 0 else None


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _of_one_gpu(share: Decimal | None) -> Decimal | None:
    """A share of one GPU, rounded down to the contract's places; None unless it is more than 0 and at most 1."""
    if share is None or share > 1:
        return None
    share = share.quantize(GPUS_QUANTUM, ROUND_DOWN)
    return share if share > 0 else None


def requested_share(pod: dict[str, Any], gpu_memory_mib: float | None) -> Decimal | None:
    """The GPUs a pod asks for by share (0.5; 2 x 0.3 = 0.6 for two GPUs at 30% each), or None where its spec names
    no share. `gpu_memory_mib` is the memory of the GPU it runs on (from its samples), for requests in memory."""
    annotations: dict[str, Any] = _mapping(pod.get("annotations"))
    requests: dict[str, Any] = _mapping(pod.get("requests"))
    if (fraction := _of_one_gpu(_number(annotations.get(RUNAI_FRACTION)))) is not None:
        return fraction
    count = _number(requests.get(GPU_COUNT)) or Decimal(1)
    if count % 1:
        return None
    share = None
    if (cores := _number(requests.get(HAMI_CORES))) is not None:
        share = _of_one_gpu(cores / 100)
    elif (percent := _number(requests.get(HAMI_MEM_PERCENT))) is not None:
        share = _of_one_gpu(percent / 100)
    elif gpu_memory_mib and (mib := _number(requests.get(HAMI_MEM))) is not None:
        share = _of_one_gpu(mib / Decimal(str(gpu_memory_mib)))
    elif gpu_memory_mib and (gib := _number(requests.get(ALIYUN_MEM))) is not None:
        share = _of_one_gpu(gib * MIB_PER_GIB / Decimal(str(gpu_memory_mib)))
    if share is None or share == 1:
        return None  # a whole GPU is what the device ids already say
    return share * count
