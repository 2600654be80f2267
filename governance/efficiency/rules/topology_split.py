"""topology_split: a multi-GPU job placed farther apart than it needed to be.

Across nodes: its GPUs span nodes although one node of its cluster holds that many GPUs. On one node: its GPUs talk
through the CPU's host bridge or across sockets while a set of as many GPUs with nearer links (NVLink, one PCIe
switch) sat free on that node for the whole run; this needs the node's topology, which its collector reports
(`gpu-collector topology`, POST /api/v1/topology/). No money is put on it: the cost is speed.
"""

from __future__ import annotations

from governance.efficiency.rules.base import WARNING, Draft, rule
from governance.efficiency.summary import JobSummary
from governance.efficiency.thresholds import Thresholds

NODE_ADVICE = (
    "Ask for a placement that follows the topology: in Slurm, describe the links in gres.conf (AutoDetect=nvml, or "
    "Links=) and submit with --gres-flags=enforce-binding; in Kubernetes, a topology-aware GPU allocation (the device "
    "plugin's or the scheduler's). Check the transport NCCL picked with NCCL_DEBUG=INFO (P2P/NVLink, not SHM)."
)


@rule("topology_split")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    nodes = sorted({g.node for g in job.gpus})
    if len(job.gpus) >= 2 and len(nodes) >= 2 and job.largest_node_gpus >= len(job.gpus):
        return [
            Draft(
                rule="topology_split",
                severity=WARNING,
                evidence={"gpus": len(job.gpus), "nodes": nodes, "largest_node_gpus": job.largest_node_gpus},
                advice=(
                    f"The job's {len(job.gpus)} GPUs are spread over {len(nodes)} nodes ({', '.join(nodes)}) while "
                    f"one node of the cluster holds {job.largest_node_gpus}: pack it on one node / NVLink domain "
                    "(Slurm --nodes=1, or a Kubernetes pod asking for all its GPUs)."
                ),
                currency=job.currency,
            )
        ]
    placed = job.placement
    if placed is None:
        return []
    return [
        Draft(
            rule="topology_split",
            severity=WARNING,
            evidence={
                "node": placed.node,
                "gpu_indexes": list(placed.indexes),
                "link": placed.link,
                "free_indexes": list(placed.free),
                "free_link": placed.free_link,
            },
            advice=f"{placed.says()[0].upper()}{placed.says()[1:]}. {NODE_ADVICE}",
            currency=job.currency,
        )
    ]
