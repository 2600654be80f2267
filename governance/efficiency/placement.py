"""Placement on a node: a multi-GPU job whose GPUs talk through the CPU's host bridge or across sockets while a set
of the same size with nearer links (NVLink, one PCIe switch) was free on that node for the whole run.

Reads the node's topology as its collector reported it (fleet.NodeTopology) and which of the node's GPUs other jobs
held during the run (the job-GPU-hour rollups). Reads only.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from collectors.topology import FAR, Topology, kind, rank
from governance.efficiency.summary import JobSummary, Placement
from governance.fleet.models import NodeTopology
from governance.usage.models import JobGpuHour


def _hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def job_placements(summaries: list[JobSummary]) -> dict[int, Placement]:
    """Misplaced jobs among these, by job id: those on one node with its topology known, whose farthest link is
    through the host bridge or farther, and a nearer set of as many GPUs was held by no other job during the run.
    One query for the topologies, then one per job that could be misplaced."""
    on_one_node = {
        s.job_id: s
        for s in summaries
        if len(s.gpus) >= 2 and len({g.node for g in s.gpus}) == 1 and not any(g.mig_profile for g in s.gpus)
    }
    if not on_one_node:
        return {}
    clusters_nodes = {(s.cluster, s.gpus[0].node) for s in on_one_node.values()}
    topologies = {
        (t.node.cluster.name, t.node.name): (t.node_id, Topology.of(t.gpus, t.links))
        for t in NodeTopology.objects.select_related("node__cluster").filter(
            node__cluster__name__in={c for c, _ in clusters_nodes}, node__name__in={n for _, n in clusters_nodes}
        )
    }
    found: dict[int, Placement] = {}
    for job_id, s in on_one_node.items():
        known = topologies.get((s.cluster, s.gpus[0].node))
        if known is None:
            continue
        node_id, topology = known
        indexes = tuple(sorted(g.index for g in s.gpus))
        if any(i >= topology.gpus for i in indexes):
            continue  # the report and the GPUs seen disagree: say nothing rather than something wrong
        link = topology.worst(indexes)
        if link is None or kind(link) not in FAR:
            continue
        busy: dict[int, int] = defaultdict(int)
        for index in (
            JobGpuHour.objects.filter(gpu__node_id=node_id, hour__gte=_hour(s.start), hour__lt=s.end)
            .exclude(job_id=job_id)
            .values_list("gpu__index", flat=True)
            .distinct()
        ):
            busy[index] += 1
        free = [i for i in range(topology.gpus) if i not in busy]
        best = topology.best_set(len(indexes), free)
        if best is not None and rank(best[1]) < rank(link) and kind(best[1]) not in FAR:
            found[job_id] = Placement(s.gpus[0].node, indexes, link, best[0], best[1])
    return found
