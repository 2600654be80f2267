"""numa_misaligned: the job's CPUs run on NUMA nodes other than its GPUs' node for much of the time.

The rollup counts samples whose job CPU mask excludes the GPU's node; which nodes the CPUs were on is only in
the raw samples, so the advice names the GPU's node, not the CPUs'. No money is put on it: the cost is speed.
"""

from __future__ import annotations

from governance.efficiency.rules.base import INFO, Draft, pct, r, rule
from governance.efficiency.summary import GpuSummary, JobSummary
from governance.efficiency.thresholds import Thresholds


def _share(gpu: GpuSummary) -> float:
    return gpu.numa_mismatch_samples / gpu.samples if gpu.samples else 0.0


@rule("numa_misaligned")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    off = [g for g in job.gpus if g.samples and _share(g) >= t.numa_mismatch_fraction]
    if not off:
        return []
    gpus = [
        {"gpu": f"{g.node}:{g.index}", "gpu_numa_node": g.numa_node, "mismatch_fraction": r(_share(g))} for g in off
    ]
    nodes = sorted({g.numa_node for g in off if g.numa_node is not None})
    where = f"NUMA node{'s' if len(nodes) > 1 else ''} {', '.join(map(str, nodes))}" if nodes else "their NUMA node"
    share = max(r(_share(g)) for g in off)
    return [
        Draft(
            rule="numa_misaligned",
            severity=INFO,
            evidence={"gpus": gpus},
            advice=(
                f"For up to {pct(100 * share)} of samples the job's CPUs ran off the NUMA node of "
                f"{len(off)} of its GPUs, which sit on {where}: bind CPUs to the GPUs' node "
                f"(Slurm --cpu-bind=cores --gpu-bind=closest, or numactl --cpunodebind={nodes[0] if nodes else 'N'})."
            ),
            currency=job.currency,
        )
    ]
