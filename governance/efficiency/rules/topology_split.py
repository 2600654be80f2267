"""topology_split: a multi-GPU job spans nodes although one node of its cluster holds that many GPUs.

Rollups know each GPU's node, not its PCIe root or NVLink domain (those are raw-sample fields), so this
rule sees splits across nodes only. No money is put on it: the cost is speed.
"""

from __future__ import annotations

from governance.efficiency.rules.base import WARNING, Draft, rule
from governance.efficiency.summary import JobSummary
from governance.efficiency.thresholds import Thresholds


@rule("topology_split")
def check(job: JobSummary, t: Thresholds) -> list[Draft]:
    nodes = sorted({g.node for g in job.gpus})
    if len(job.gpus) < 2 or len(nodes) < 2 or job.largest_node_gpus < len(job.gpus):
        return []
    return [
        Draft(
            rule="topology_split",
            severity=WARNING,
            evidence={"gpus": len(job.gpus), "nodes": nodes, "largest_node_gpus": job.largest_node_gpus},
            advice=(
                f"The job's {len(job.gpus)} GPUs are spread over {len(nodes)} nodes ({', '.join(nodes)}) while one "
                f"node of the cluster holds {job.largest_node_gpus}: pack it on one node / NVLink domain "
                "(Slurm --nodes=1, or a Kubernetes pod asking for all its GPUs)."
            ),
            currency=job.currency,
        )
    ]
