import gzip
import zlib
from datetime import timedelta
from typing import cast

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db.models import QuerySet
from django.urls import path, re_path
from django.utils import timezone
from django_filters import rest_framework as filters
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, parsers, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from collectors.records import BatchInvalid, ClusterNotAllowed
from governance.api.auth import HasIngestScope, HasReadScope
from governance.api.errors import error_response
from governance.api.fields import BoundedDateTimeField
from governance.api.filters import (
    KnownQueryParameters,
    UtcIsoDateTimeFilter,
    cluster_filter,
    project_filter,
    team_filter,
)
from governance.api.models import ApiToken
from governance.api.permissions import AdminOnly
from governance.api.viewsets import ApiReadOnlyViewSet, VisibleQuerysetMixin
from governance.fleet.models import Cluster
from governance.lib.ranges import MAX_RANGE_DAYS, range_problem
from governance.org.models import Project, User
from governance.usage.models import IngestBatch, Job, JobChange
from governance.usage.selectors import (
    RESOLUTIONS,
    cluster_utilisation_series,
    inbox_dead,
    job_history,
    job_usage_series,
    jobs_visible,
)
from governance.usage.services import BatchConflict, usage_batch_receive

BODY_TOO_LARGE = "The batch is larger than {limit} bytes after decompression; send smaller batches."
BODY_NOT_GZIP = "Content-Encoding is gzip but the body is not valid gzip."
CLUSTER_NOT_ALLOWED = "The token may not report the clusters these records name; nothing was stored."


class RawBodyParser(parsers.BaseParser):
    """Leaves the body as bytes: the ingest path decodes and validates it in one msgspec pass."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read()


class BodyTooLarge(Exception):
    pass


def _read_body(request: Request) -> bytes:
    limit = settings.INGEST_MAX_BODY_BYTES
    try:
        body = request._request.body  # raw bytes; never parsed by DRF
    except RequestDataTooBig:
        raise BodyTooLarge(BODY_TOO_LARGE.format(limit=limit)) from None
    if request.headers.get("Content-Encoding", "").lower() == "gzip":
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            body = decompressor.decompress(body, limit + 1)
        except zlib.error:
            raise gzip.BadGzipFile(BODY_NOT_GZIP) from None
    if len(body) > limit:
        raise BodyTooLarge(BODY_TOO_LARGE.format(limit=limit))
    return body


class IngestView(APIView):
    """Accept a batch of job and sample records; 202 means it is stored and will be processed.

    Every record must name a cluster the token is bound to (a platform admin's admin token: any).
    """

    permission_classes = [HasIngestScope]
    parser_classes = [RawBodyParser]
    throttle_scope = "ingest"

    @extend_schema(
        request={"application/json": {"type": "object"}},
        responses={
            202: OpenApiResponse(description="Stored; processed asynchronously."),
            400: OpenApiResponse(
                description="Invalid records (code `invalid_records`), or records naming a cluster the token may not"
                " report (code `cluster_not_allowed`), each with index, field and reason."
            ),
            409: OpenApiResponse(description="The batch id was seen with other records."),
            413: OpenApiResponse(description="The batch is too large."),
        },
    )
    def post(self, request: Request) -> Response:
        token = cast(ApiToken, request.auth)  # HasIngestScope lets only an ingest ApiToken in
        try:
            receipt = usage_batch_receive(body=_read_body(request), clusters=token.ingest_clusters(), token_id=token.pk)
        except BodyTooLarge as exc:
            return error_response(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, "too_large", str(exc))
        except gzip.BadGzipFile as exc:
            return error_response(status.HTTP_400_BAD_REQUEST, "bad_encoding", str(exc))
        except ClusterNotAllowed as exc:  # its own code: the token's binding is wrong, not the batch
            details = [e.as_dict() for e in exc.errors]
            return error_response(status.HTTP_400_BAD_REQUEST, "cluster_not_allowed", CLUSTER_NOT_ALLOWED, details)
        except BatchInvalid as exc:
            details = [e.as_dict() for e in exc.errors]
            message = "The batch has invalid records; nothing was stored."
            return error_response(status.HTTP_400_BAD_REQUEST, "invalid_records", message, details)
        except BatchConflict as exc:
            return error_response(status.HTTP_409_CONFLICT, "batch_conflict", str(exc))
        return Response(
            {"batch_id": str(receipt.batch_id), "records": receipt.records, "duplicate": receipt.duplicate},
            status=status.HTTP_202_ACCEPTED,
        )


class DeadBatchSerializer(serializers.ModelSerializer):
    class Meta:
        model = IngestBatch
        fields = ["id", "batch_id", "collector", "source", "record_count", "received_at", "attempts", "dead_at",
                  "last_error"]  # fmt: skip


class DeadBatchListView(generics.ListAPIView):
    """Batches the worker gave up on after INGEST_MAX_ATTEMPTS, with their last error; admins only.
    Re-queue them from the Django admin (action "Re-queue") once the cause is fixed."""

    serializer_class = DeadBatchSerializer
    permission_classes = [HasReadScope, AdminOnly]
    filter_backends = [KnownQueryParameters]

    def get_queryset(self) -> QuerySet[IngestBatch]:
        return inbox_dead().defer("body")


# --- Jobs and utilisation (read from the hourly rollups) -------------------------------------------

UTILISATION_DEFAULT_DAYS = 7


class JobSerializer(serializers.ModelSerializer):
    cluster: "serializers.SlugRelatedField[Cluster]" = serializers.SlugRelatedField(slug_field="name", read_only=True)
    project: "serializers.SlugRelatedField[Project]" = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    team = serializers.SerializerMethodField()
    gpus = serializers.DecimalField(
        max_digits=12, decimal_places=6, coerce_to_string=False, read_only=True, allow_null=True, min_value=0,
        help_text="GPUs the scheduler declares, or the share of one GPU the job holds (0.47); null: unknown.",
    )  # fmt: skip

    class Meta:
        model = Job
        fields = [
            "id", "cluster", "external_id", "user_name", "account", "project", "team", "gpus", "gpu_model",
            "submit_time", "start_time", "end_time", "state", "labels",
        ]  # fmt: skip

    def get_team(self, job: Job) -> str | None:
        return job.project.team.slug if job.project else None


class JobFilter(filters.FilterSet):
    cluster = cluster_filter("cluster__name")
    project = project_filter("project__slug")
    team = team_filter("project__team__slug")
    user = filters.CharFilter(field_name="user_name")
    started_after = UtcIsoDateTimeFilter(field_name="start_time", lookup_expr="gte")
    started_before = UtcIsoDateTimeFilter(field_name="start_time", lookup_expr="lt")
    running = filters.BooleanFilter(field_name="end_time", lookup_expr="isnull")

    class Meta:
        model = Job
        fields = ["cluster", "project", "team", "user", "state", "gpu_model", "external_id"]


class ResolutionQuery(serializers.Serializer):
    resolution = serializers.ChoiceField(choices=RESOLUTIONS, default="hour")


class UtilisationQuery(ResolutionQuery):
    start = BoundedDateTimeField(required=False, help_text="Default: 7 days before end.")
    end = BoundedDateTimeField(required=False, help_text=f"Default: now. At most {MAX_RANGE_DAYS} days after start.")

    def validate(self, data: dict) -> dict:
        data.setdefault("end", timezone.now())
        data.setdefault("start", data["end"] - timedelta(days=UTILISATION_DEFAULT_DAYS))
        problem = range_problem(data["start"], data["end"])
        if problem:
            raise serializers.ValidationError({problem[0]: problem[1]})
        return data


class UsagePointSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    gpu_hours = serializers.IntegerField(help_text="GPU-hours with at least one sample.")
    samples = serializers.IntegerField()
    sm_mean = serializers.FloatField(allow_null=True, help_text="Mean SM utilisation, percent.")
    idle_share = serializers.FloatField(allow_null=True, help_text="Share of samples under the idle threshold.")
    mem_used_max_mib = serializers.FloatField(allow_null=True)
    power_mean_w = serializers.FloatField(allow_null=True)


class JobUsageSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    resolution = serializers.ChoiceField(choices=RESOLUTIONS)
    points = UsagePointSerializer(many=True)


class UtilisationPointSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    gpus = serializers.IntegerField(help_text="GPUs that reported in the bucket.")
    gpu_hours = serializers.IntegerField()
    sm_mean = serializers.FloatField(allow_null=True)
    allocated_share = serializers.FloatField(allow_null=True)
    idle_share = serializers.FloatField(allow_null=True)


class ClusterUtilisationSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    resolution = serializers.ChoiceField(choices=RESOLUTIONS)
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    points = UtilisationPointSerializer(many=True)


class JobChangeSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobChange
        fields = ["at", "field", "old_value", "new_value", "door", "actor_name", "token_name"]


class JobViewSet(ApiReadOnlyViewSet):
    """Jobs you may see: admins and finance all, leads their teams', engineers their own."""

    serializer_class = JobSerializer
    filterset_class = JobFilter
    ordering_fields = ["start_time", "end_time", "gpus", "id"]

    def visible(self, user: User) -> QuerySet[Job]:
        return jobs_visible(user=user).order_by("-start_time", "-id")

    @extend_schema(parameters=[ResolutionQuery], responses=JobUsageSerializer, filters=False)
    @action(detail=True, methods=["get"], pagination_class=None, filterset_class=None)
    def usage(self, request: Request, pk: str | None = None) -> Response:
        """The job's GPU use per hour or per day, from the hourly rollups."""
        job = self.get_object()
        query = ResolutionQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        resolution = query.validated_data["resolution"]
        points = job_usage_series(job=job, resolution=resolution)
        return Response(JobUsageSerializer({"job": job.pk, "resolution": resolution, "points": points}).data)

    @extend_schema(responses=JobChangeSerializer(many=True), filters=False)
    @action(detail=True, methods=["get"], pagination_class=None, filterset_class=None)
    def history(self, request: Request, pk: str | None = None) -> Response:
        """What changed on the job after it was billed (project, team, user, GPUs, times, state): old and new
        value, when, through which door, by which user or token; the latest first."""
        return Response(JobChangeSerializer(job_history(job=self.get_object()), many=True).data)


class ClusterUtilisationView(VisibleQuerysetMixin, generics.GenericAPIView):
    """Cluster-wide GPU utilisation over time (every GPU, allocated or not); no team's data in it."""

    serializer_class = ClusterUtilisationSerializer
    permission_classes = [HasReadScope]
    pagination_class = None
    filter_backends: list = []

    def visible(self, user: User) -> QuerySet[Cluster]:
        return Cluster.objects.all() if user.is_authenticated and user.is_active else Cluster.objects.none()

    @extend_schema(parameters=[UtilisationQuery], responses=ClusterUtilisationSerializer)
    def get(self, request: Request, pk: str) -> Response:
        cluster = self.get_object()
        query = UtilisationQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        points = cluster_utilisation_series(
            cluster_id=cluster.pk, resolution=q["resolution"], start=q["start"], end=q["end"]
        )
        data = {"cluster": cluster.name, "resolution": q["resolution"], "start": q["start"], "end": q["end"]}
        return Response(ClusterUtilisationSerializer({**data, "points": points}).data)


ROUTES = [
    ("jobs", JobViewSet, "job"),
]
URLS = [
    path("ingest/dead/", DeadBatchListView.as_view(), name="ingest-dead"),
    # Any id reaches the view, so an unknown one is a 404 in the API's error shape, not Django's HTML page.
    re_path(r"^clusters/(?P<pk>-?\d+)/utilisation/$", ClusterUtilisationView.as_view(), name="cluster-utilisation"),
]
