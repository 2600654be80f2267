"""Writes of the fleet: an admin confirms GPUs seen beyond a cluster's declared capacity; a collector reports its
node's GPU topology."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from collectors.topology import TopologyReport
from governance.fleet.models import Cluster, Gpu, Node, NodeTopology
from governance.lib.enqueue import enqueue_on_commit

# Confirmed GPUs are capacity and billed again from their first report: the costs app re-prices (by task name).
CONFIRMED_TASK = "costs.gpus_confirmed"


def gpus_confirm(*, pks: Iterable[int], now: datetime | None = None) -> list[int]:
    """Confirm these GPUs (they count as capacity and are billed from their first report); returns the ids of those
    that were unconfirmed. The days they touch are re-priced once this commits."""
    now = now or timezone.now()
    with transaction.atomic():
        ids = list(
            Gpu.objects.select_for_update()
            .filter(pk__in=list(pks), unconfirmed=True)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        Gpu.objects.filter(pk__in=ids).update(unconfirmed=False, confirmed_at=now)
        if ids:
            enqueue_on_commit(CONFIRMED_TASK, ids)
    return ids


class TopologyNotAllowed(Exception):
    """The token may not report the cluster the topology names."""


def node_topology_record(*, report: TopologyReport, clusters: frozenset[str] | None) -> NodeTopology:
    """Store a node's topology as its collector reports it (the latest report wins), creating the cluster and node
    if this is the first word of them, as a batch would."""
    if clusters is not None and report.cluster not in clusters:
        raise TopologyNotAllowed(f"cluster: this token may not report {report.cluster!r}")
    with transaction.atomic():
        cluster, _ = Cluster.objects.get_or_create(name=report.cluster)
        node, _ = Node.objects.get_or_create(cluster=cluster, name=report.node)
        topology, _ = NodeTopology.objects.update_or_create(
            node=node,
            defaults={
                "gpus": report.gpus,
                "links": report.links,
                "source": report.source,
                "reported_at": timezone.now(),
            },
        )
    return topology
