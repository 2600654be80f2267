"""memory_bound: SM stays low while memory sets the pace, by capacity (memory nearly full) or, where the source gives
DRAM activity (GPM, DCGM profiling), by bandwidth (DRAM busy): the model, not the compute, sets the pace."""

from __future__ import annotations

from governance.efficiency.rules.base import WARNING, Draft, pct, r, rule
from governance.efficiency.summary import JobSummary, gib
from governance.efficiency.thresholds import Thresholds


@rule("memory_bound")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    if job.sm_mean >= t.memory_bound_sm_percent:
        return []
    total, peak = job.mem_total_mib, job.mem_peak_mib
    known_share = 100 * peak / total if total else None
    known_dram = job.profile_mean("dram")
    full = known_share is not None and known_share > t.memory_bound_memory_percent
    busy = known_dram is not None and known_dram >= t.memory_bound_dram_percent
    share, dram = known_share or 0.0, known_dram or 0.0
    if not full and not busy:
        return []
    evidence: dict[str, object] = {}
    if known_share is not None:
        evidence |= {
            "mem_peak_gib": r(gib(peak), 1),
            "mem_total_gib": r(gib(total), 1),
            "mem_peak_percent": r(share, 1),
        }
    if known_dram is not None:
        evidence["dram_active_mean"] = r(dram, 1)
    evidence["sm_mean"] = r(job.sm_mean, 1)
    if full:
        advice = (
            f"Memory peaks at {gib(peak):.1f} of {gib(total):.0f} GiB ({pct(share)}) while SM averages "
            f"{pct(job.sm_mean)}: use mixed precision (bf16/fp16), gradient checkpointing, or prune the model "
            "to free memory for a batch size that keeps the SMs busy."
        )
    else:
        advice = (
            f"DRAM is busy {pct(dram)} of the time while SM averages {pct(job.sm_mean)}: the kernels wait on memory "
            "bandwidth, not compute. Move fewer bytes: mixed precision (bf16/fp16 halves them), fused kernels "
            "(torch.compile, FlashAttention), and a larger batch for more reuse per byte read."
        )
    if full and busy:
        advice += f" DRAM is busy {pct(dram)} of the time too: fused kernels (torch.compile, FlashAttention) help both."
    return [
        Draft(
            rule="memory_bound",
            severity=WARNING,
            evidence=evidence,
            wasted_hours=job.unused_hours_by_day(),
            advice=advice,
            currency=job.currency,
        )
    ]
