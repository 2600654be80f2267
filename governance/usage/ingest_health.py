"""Reads of the ingest health page (admins): per cluster and node, per collector, and the inbox as a whole.

Per cluster: its nodes and GPUs, the newest reading, samples in the last hour, and the lag from ingest to pricing
(the oldest day ingest marked that the pricing pass has not priced yet). Per node: its newest reading and samples in
the last hour; silent once it has reported nothing for the collectors' silence threshold. Per collector: its last
batch (usage.CollectorStatus), its batches waiting and dead. Samples are counted over one hour only (the partition
and BRIN index of `ts` bound the scan); everything else reads small tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Min, Q
from django.utils import timezone

from governance.fleet.models import Cluster, Node
from governance.usage.collectors import silence_after
from governance.usage.models import CollectorStatus, IngestBatch, PricingMark, Sample


@dataclass(frozen=True)
class ClusterHealth:
    name: str
    nodes: int
    gpus: int
    last_reading: datetime | None
    samples_last_hour: int
    unpriced_marks: int
    pricing_lag: timedelta | None  # None: nothing waits to be priced


@dataclass(frozen=True)
class NodeHealth:
    cluster: str
    name: str
    last_reading: datetime | None
    samples_last_hour: int
    silent: bool


@dataclass(frozen=True)
class CollectorHealth:
    collector: str
    last_batch_at: datetime
    pending: int
    dead: int
    silent: bool
    announced_at: datetime | None


@dataclass(frozen=True)
class IngestHealth:
    now: datetime
    silence_after: timedelta
    pending: int
    oldest_pending: timedelta | None
    dead: int
    clusters: list[ClusterHealth]
    nodes: list[NodeHealth]
    collectors: list[CollectorHealth]

    @property
    def silent_collectors(self) -> list[CollectorHealth]:
        return [c for c in self.collectors if c.silent]


def ingest_health(*, now: datetime | None = None) -> IngestHealth:
    now = now or timezone.now()
    quiet = silence_after()
    hour_ago = now - timedelta(hours=1)
    per_node = dict(
        Sample.objects.filter(ts__gte=hour_ago, ts__lte=now)
        .values_list("gpu__node_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    nodes = list(
        Node.objects.select_related("cluster").annotate(gpu_count=Count("gpus")).order_by("cluster__name", "name")
    )
    marks = {
        r["cluster_id"]: r
        for r in PricingMark.objects.values("cluster_id").annotate(n=Count("id"), oldest=Min("created_at")).order_by()
    }
    clusters = []
    for cluster in Cluster.objects.order_by("name"):
        mine = [n for n in nodes if n.cluster_id == cluster.pk]
        readings = [n.last_seen_at for n in mine if n.last_seen_at]
        mark = marks.get(cluster.pk)
        clusters.append(
            ClusterHealth(
                name=cluster.name, nodes=len(mine), gpus=sum(n.gpu_count for n in mine),
                last_reading=max(readings) if readings else None,
                samples_last_hour=sum(per_node.get(n.pk, 0) for n in mine),
                unpriced_marks=mark["n"] if mark else 0,
                pricing_lag=max(now - mark["oldest"], timedelta(0)) if mark else None,
            )
        )  # fmt: skip
    node_rows = [
        NodeHealth(
            cluster=n.cluster.name, name=n.name, last_reading=n.last_seen_at, samples_last_hour=per_node.get(n.pk, 0),
            silent=n.last_seen_at is None or n.last_seen_at < now - quiet,
        )
        for n in nodes
    ]  # fmt: skip
    waiting = IngestBatch.objects.filter(processed_at__isnull=True)
    live, dead = Q(dead_at__isnull=True), Q(dead_at__isnull=False)
    counts = waiting.values("collector").annotate(pending=Count("id", filter=live), dead=Count("id", filter=dead))
    by_collector = {r["collector"]: r for r in counts.order_by()}
    collectors = [
        CollectorHealth(
            collector=c.collector, last_batch_at=c.last_batch_at,
            pending=by_collector.get(c.collector, {}).get("pending", 0),
            dead=by_collector.get(c.collector, {}).get("dead", 0),
            silent=c.last_batch_at < now - quiet, announced_at=c.silent_since,
        )
        for c in CollectorStatus.objects.order_by("collector")
    ]  # fmt: skip
    inbox = waiting.aggregate(
        pending=Count("id", filter=live), dead=Count("id", filter=dead), oldest=Min("received_at", filter=live)
    )
    return IngestHealth(
        now=now, silence_after=quiet, pending=inbox["pending"], dead=inbox["dead"],
        oldest_pending=now - inbox["oldest"] if inbox["oldest"] else None,
        clusters=clusters, nodes=node_rows, collectors=collectors,
    )  # fmt: skip
