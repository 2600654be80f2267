"""comm_bound: a multi-GPU job whose SM stays low while NVLink or PCIe is busy: the GPUs wait on each other.

Needs the link counters (NVML's GPM NVLink throughput, DCGM's profiling NVLink bytes, NVML's PCIe throughput); a
job whose source gives none is never flagged. No money is put on it: the GPUs are held and moving data, and what
overlapping or cutting that traffic saves is speed, which the job's next runs will show.
"""

from __future__ import annotations

from governance.efficiency.rules.base import WARNING, Draft, pct, r, rule
from governance.efficiency.summary import JobSummary
from governance.efficiency.thresholds import Thresholds


def _gib_s(mibps: float) -> str:
    return f"{mibps / 1024:.1f} GiB/s"


@rule("comm_bound")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    if len(job.gpus) < 2 or job.sm_mean >= t.comm_bound_sm_percent:
        return []
    nvlink, pcie = job.profile_mean("nvlink"), job.profile_mean("pcie")
    over_nvlink = nvlink is not None and nvlink >= t.comm_bound_nvlink_mibps
    over_pcie = pcie is not None and pcie >= t.comm_bound_pcie_mibps
    if not over_nvlink and not over_pcie:
        return []
    if over_nvlink:
        link = f"NVLink carries {_gib_s(nvlink or 0.0)} per GPU"
        where = "check NCCL runs over NVLink (NCCL_DEBUG=INFO names the transport)"
    else:
        link = f"PCIe carries {_gib_s(pcie or 0.0)} per GPU and no NVLink traffic is seen"
        where = (
            "its GPUs talk over PCIe: ask for GPUs that share NVLink (see a topology finding on this job, if any) "
            "or keep the job on fewer GPUs"
        )
    return [
        Draft(
            rule="comm_bound",
            severity=WARNING,
            evidence={
                "gpus_held": len(job.gpus),
                "sm_mean": r(job.sm_mean, 1),
                "nvlink_mibps_mean": r(nvlink, 0) if nvlink is not None else None,
                "pcie_mibps_mean": r(pcie, 0) if pcie is not None else None,
            },
            advice=(
                f"SM averages {pct(job.sm_mean)} on {len(job.gpus)} GPUs while {link}: the GPUs wait on each other. "
                "Overlap communication with compute (DDP gradient buckets, FSDP prefetch), sync less often "
                f"(gradient accumulation over more micro-batches), and {where}."
            ),
            currency=job.currency,
        )
    ]
