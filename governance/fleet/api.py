"""Clusters, nodes and GPUs: shared infrastructure every signed-in user may read; admins set cluster policy."""

from typing import cast

import msgspec
from django.db.models import QuerySet
from django.urls import path
from django_filters import rest_framework as filters
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from collectors.topology import TopologyReport
from governance.api.auth import HasIngestScope
from governance.api.errors import error_response
from governance.api.filters import cluster_filter
from governance.api.models import ApiToken, AuditEntry
from governance.api.permissions import AdminOnly, AdminWrites, HasReadScope
from governance.api.services import audit_entry_record
from governance.api.viewsets import ApiModelViewSet, ApiReadOnlyViewSet
from governance.fleet.models import Cluster, Gpu, Node
from governance.fleet.services import TopologyNotAllowed, gpus_confirm, node_topology_record
from governance.org.models import User


def _signed_in(user: User) -> bool:
    return user.is_authenticated and user.is_active


class ClusterSerializer(serializers.ModelSerializer):
    unallocated_policy = serializers.CharField(
        read_only=True, help_text="The policy in force now; change it from a date on through /api/v1/policies/."
    )

    class Meta:
        model = Cluster
        fields = ["id", "name", "unallocated_policy", "created_at"]


class NodeSerializer(serializers.ModelSerializer):
    cluster: "serializers.SlugRelatedField[Cluster]" = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Node
        fields = ["id", "cluster", "name", "last_seen_at"]


class GpuSerializer(serializers.ModelSerializer):
    cluster: "serializers.SlugRelatedField[Cluster]" = serializers.SlugRelatedField(slug_field="name", read_only=True)
    node: "serializers.SlugRelatedField[Node]" = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Gpu
        fields = [
            "id", "cluster", "node", "uuid", "index", "model", "memory_total_mib", "numa_node", "mig_profile",
            "first_seen_at", "last_seen_at", "unconfirmed", "confirmed_at",
        ]  # fmt: skip


class ClusterFilter(filters.FilterSet):
    class Meta:
        model = Cluster
        fields = ["name", "unallocated_policy"]


class NodeFilter(filters.FilterSet):
    cluster = cluster_filter("cluster__name")

    class Meta:
        model = Node
        fields = ["cluster", "name"]


class GpuFilter(filters.FilterSet):
    cluster = cluster_filter("cluster__name")
    node = filters.CharFilter(field_name="node__name")

    class Meta:
        model = Gpu
        fields = ["cluster", "node", "model", "uuid", "mig_profile", "unconfirmed"]


class ClusterViewSet(ApiModelViewSet):
    serializer_class = ClusterSerializer
    filterset_class = ClusterFilter
    permission_classes = [HasReadScope, AdminWrites]

    def visible(self, user: User) -> QuerySet[Cluster]:
        return Cluster.objects.all() if _signed_in(user) else Cluster.objects.none()


class NodeViewSet(ApiReadOnlyViewSet):
    serializer_class = NodeSerializer
    filterset_class = NodeFilter

    def visible(self, user: User) -> QuerySet[Node]:
        return (
            Node.objects.select_related("cluster").order_by("cluster__name", "name")
            if _signed_in(user)
            else Node.objects.none()
        )


class GpuViewSet(ApiReadOnlyViewSet):
    serializer_class = GpuSerializer
    filterset_class = GpuFilter

    def visible(self, user: User) -> QuerySet[Gpu]:
        if not _signed_in(user):
            return Gpu.objects.none()
        return Gpu.objects.select_related("cluster", "node").order_by("cluster__name", "node__name", "index", "pk")

    @extend_schema(request=None, responses={200: GpuSerializer})
    @action(detail=True, methods=["post"], permission_classes=[HasReadScope, AdminOnly])
    def confirm(self, request: Request, pk: str | None = None) -> Response:
        """Confirm a GPU seen beyond its cluster's declared capacity (admins): it counts as capacity and is billed
        from its first report."""
        gpu = self.get_object()
        if gpus_confirm(pks=[gpu.pk]):
            token = request.auth if isinstance(request.auth, ApiToken) else None
            audit_entry_record(actor=cast(User, request.user), token=token, action=AuditEntry.Action.UPDATE,
                               instance=gpu, changes={"unconfirmed": [True, False]})  # fmt: skip
            gpu.refresh_from_db()
        return Response(GpuSerializer(gpu).data)


ROUTES = [
    ("clusters", ClusterViewSet, "cluster"),
    ("nodes", NodeViewSet, "node"),
    ("gpus", GpuViewSet, "gpu"),
]


TOPOLOGY_INVALID = "The topology report is invalid; nothing was stored."


@extend_schema(
    request={"application/json": {"type": "object"}},
    responses={
        200: OpenApiResponse(description="Stored: the node's topology as reported (the latest report wins)."),
        400: OpenApiResponse(description="Invalid report (code `invalid_topology`, naming the field and reason), or a "
                             "cluster the token may not report (code `cluster_not_allowed`)."),
    },
)  # fmt: skip
class TopologyView(APIView):
    """A collector reports its node's GPU topology, once at start and when it changes: every pair of GPU indexes
    'i-j' (i < j) with nvidia-smi's link name (NV#, PIX, PXB, PHB, NODE, SYS). The placement rule reads it."""

    permission_classes = [HasIngestScope]
    parser_classes = [JSONParser]  # read as raw bytes into the report's type; request.data is never touched
    throttle_scope = "ingest"

    def post(self, request: Request) -> Response:
        token = cast(ApiToken, request.auth)  # HasIngestScope lets only an ingest ApiToken in
        try:
            report = msgspec.json.decode(request._request.body, type=TopologyReport)
            topology = node_topology_record(report=report, clusters=token.ingest_clusters())
        except msgspec.ValidationError as exc:
            return error_response(status.HTTP_400_BAD_REQUEST, "invalid_topology", TOPOLOGY_INVALID, str(exc))
        except msgspec.DecodeError as exc:
            return error_response(status.HTTP_400_BAD_REQUEST, "invalid_topology", TOPOLOGY_INVALID, str(exc))
        except TopologyNotAllowed as exc:
            return error_response(status.HTTP_400_BAD_REQUEST, "cluster_not_allowed", str(exc))
        return Response(
            {"cluster": report.cluster, "node": report.node, "gpus": topology.gpus, "source": topology.source,
             "reported_at": topology.reported_at}
        )  # fmt: skip


URLS = [path("topology/", TopologyView.as_view(), name="topology")]
