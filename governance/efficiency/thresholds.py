"""Rule thresholds: one frozen value per setting, read once per evaluation so a run sees one consistent set."""

from __future__ import annotations

from dataclasses import Field, dataclass, fields

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


def setting_name(field_name: str) -> str:
    return "GOVERNANCE_IDLE_SM_PERCENT" if field_name == "idle_sm_percent" else PREFIX + field_name.upper()


def _default(f: Field[float]) -> float:
    assert isinstance(f.default, int | float)  # every threshold has a number for its default
    return float(f.default)


def thresholds_from_settings() -> Thresholds:
    return Thresholds(
        **{f.name: float(getattr(settings, setting_name(f.name), _default(f))) for f in fields(Thresholds)}
    )


def thresholds_in_force() -> list[tuple[str, float, float]]:
    """(setting, value in force, design default) for every threshold: what the admin page lists."""
    current = thresholds_from_settings()
    return [(setting_name(f.name), getattr(current, f.name), _default(f)) for f in fields(Thresholds)]
