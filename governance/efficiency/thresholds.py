"""Rule thresholds: one frozen value per setting, read once per evaluation so a run sees one consistent set."""

from __future__ import annotations

from dataclasses import Field, dataclass, fields
from typing import Any

from django.conf import settings

PREFIX = "GOVERNANCE_RULE_"


@dataclass(frozen=True)
class Thresholds:
    """Defaults are the design's; settings.py reads each from the environment (GOVERNANCE_RULE_<NAME>)."""

    min_runtime_minutes: float = 5
    idle_sm_percent: float = 1.0  # GOVERNANCE_IDLE_SM_PERCENT, shared with the rollups' idle_samples
    idle_min_minutes: float = 30
    overallocated_busy_sm_percent: float = 10
    low_util_red_percent: float = 15
    low_util_note_percent: float = 25
    mig_fit_sm_percent: float = 15
    mig_fit_memory_margin: float = 1.2
    batch_headroom_sm_percent: float = 60
    batch_headroom_memory_percent: float = 50
    batch_headroom_target_memory_percent: float = 85
    memory_bound_memory_percent: float = 90
    memory_bound_sm_percent: float = 40
    memory_bound_dram_percent: float = 60  # DRAM active (bandwidth in use) at which low SM reads as memory-bound
    comm_bound_sm_percent: float = 40
    comm_bound_nvlink_mibps: float = 10240  # per GPU, rx + tx: 10 GiB/s
    comm_bound_pcie_mibps: float = 4096  # per GPU, rx + tx: 4 GiB/s
    data_starved_sm_percent: float = 40
    data_starved_io_wait_percent: float = 20
    data_starved_host_cpu_percent: float = 90
    data_starved_oscillation_cv: float = 0.5
    numa_mismatch_fraction: float = 0.5
    inference_min_hours: float = 6
    inference_sm_percent: float = 15
    inference_memory_percent: float = 50
    share_fit_use_percent: float = 25  # a job on a share of one GPU using under this much of it
    share_fit_headroom: float = 2.0  # the share suggested: this x the GPU's SM
    # time_slice_contention: the GPU's mean SM over the hours a job shared it with others, at which it is saturated
    contention_sm_percent: float = 90
    contention_min_hours: float = 1  # hours of the job spent on a GPU with other jobs at least this
    # whole_gpu_share_fit: the largest share a whole-GPU job's SM and memory peaks must stay under
    whole_share_fit_max_share: float = 0.5
    whole_share_fit_min_hours: float = 1
    # key=value labels that mark a job latency-sensitive (any one of them)
    latency_sensitive_labels: tuple[str, ...] = ("workload-type=inference", "latency-sensitive=true", "kind=inference")


def setting_name(field_name: str) -> str:
    return "GOVERNANCE_IDLE_SM_PERCENT" if field_name == "idle_sm_percent" else PREFIX + field_name.upper()


def _default(f: Field) -> float | tuple[str, ...]:
    assert isinstance(f.default, int | float | tuple)  # a number, or a tuple of words (labels)
    return f.default if isinstance(f.default, tuple) else float(f.default)


def _value(f: Field) -> Any:
    default = _default(f)
    value: Any = getattr(settings, setting_name(f.name), default)
    return tuple(str(v) for v in value) if isinstance(default, tuple) else float(value)


def thresholds_from_settings() -> Thresholds:
    values: dict[str, Any] = {f.name: _value(f) for f in fields(Thresholds)}
    return Thresholds(**values)


def _shown(value: float | tuple[str, ...]) -> float | str:
    return ", ".join(value) if isinstance(value, tuple) else value


def thresholds_in_force() -> list[tuple[str, float | str, float | str]]:
    """(setting, value in force, design default) for every threshold: what the admin page lists."""
    current = thresholds_from_settings()
    return [(setting_name(f.name), _shown(getattr(current, f.name)), _shown(_default(f))) for f in fields(Thresholds)]


def latency_sensitive(labels: dict[str, str], t: Thresholds) -> str | None:
    """The first of the latency-sensitive labels (key=value, the value compared without case) the job carries."""
    for entry in t.latency_sensitive_labels:
        key, _, value = (part.strip() for part in entry.partition("="))
        if key in labels and str(labels[key]).strip().lower() == value.lower():
            return f"{key}={labels[key]}"
    return None
