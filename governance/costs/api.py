"""The cost endpoints under /api/v1/: chargeback (JSON and FOCUS CSV), forecast, footprint, closing a month,
anomalies and what was billed to no team; the terms are in governance/costs/api_terms.py."""

import json
from typing import cast

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.utils import timezone
from django_filters import rest_framework as filters
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, mixins, renderers, serializers, status, viewsets
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from governance.api.auth import HasReadScope
from governance.api.errors import error_response
from governance.api.fields import MonthField
from governance.api.filters import KnownQueryParameters, cluster_filter, team_filter
from governance.api.permissions import AdminOnly
from governance.api.viewsets import VisibleQuerysetMixin
from governance.costs import api_failures, api_terms
from governance.costs.api_terms import NOT_ALLOWED, validation_error
from governance.costs.focus import focus_csv
from governance.costs.footprint import footprint_by_team
from governance.costs.forecasts import GROUPS, last_whole_day, spend_forecast
from governance.costs.models import (
    Anomaly,
    OverClaim,
)
from governance.costs.selectors import chargeback_by_team, month_closed, unattributed
from governance.costs.services import (
    statement_close,
)
from governance.costs.unpriced import unpriced_usage
from governance.lib.money import printed, to_cents
from governance.lib.months import Month
from governance.org.auth import signed_in_user
from governance.org.models import User
from governance.org.selectors import teams_led, teams_visible

DETAIL_NOT_ALLOWED = "The CSV has one row per job: it is for team leads, finance and admins."


class MonthQuery(serializers.Serializer):
    month = MonthField()
    team = serializers.SlugField(required=False)


class TeamChargeSerializer(serializers.Serializer):
    month = serializers.CharField()
    team = serializers.CharField()
    gpu_hours = serializers.DecimalField(max_digits=20, decimal_places=4)
    cost = serializers.DecimalField(max_digits=20, decimal_places=2)
    shared_gpu_cost = serializers.DecimalField(
        max_digits=20, decimal_places=2,
        help_text="Of the cost, what was spent on shares of one GPU (time-slicing, MPS, fractional requests).",
    )  # fmt: skip
    currency = serializers.CharField()
    closed = serializers.BooleanField()


def _csv_response(month: Month, team_ids: list[int] | None) -> StreamingHttpResponse:
    response = StreamingHttpResponse(focus_csv(month=month, team_ids=team_ids), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="chargeback-{month}.csv"'
    return response


class CsvRenderer(renderers.BaseRenderer):
    """Lets ?format=csv and Accept: text/csv through negotiation; the view streams the CSV itself."""

    media_type = "text/csv"
    format = "csv"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        # Never reached in practice: ChargebackView hands errors to the JSON renderer (finalize_response).
        return json.dumps(data, default=str).encode()


class ChargebackView(APIView):
    """Cost per team for one month (JSON), or the FOCUS 1.2 CSV with ?format=csv (one row per job per day)."""

    permission_classes = [HasReadScope]
    renderer_classes = [*cast("list[type[renderers.BaseRenderer]]", api_settings.DEFAULT_RENDERER_CLASSES), CsvRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter("month", str, required=True, description="YYYY-MM"),
            OpenApiParameter("team", str, required=False, description="team slug"),
        ],
        responses=TeamChargeSerializer(many=True),
    )
    def get(self, request: Request, format: str | None = None):
        user = signed_in_user(request)
        query = MonthQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        month = Month.parse(query.validated_data["month"])
        slug = query.validated_data.get("team")
        if request.query_params.get("format") == "csv" or "text/csv" in request.headers.get("Accept", ""):
            led = teams_led(user=user)
            if slug:
                led = led.filter(slug=slug)
            if not user.sees_all_costs and not led.exists():
                return error_response(status.HTTP_403_FORBIDDEN, "permission_denied", DETAIL_NOT_ALLOWED)
            team_ids = None if user.sees_all_costs and not slug else list(led.values_list("pk", flat=True))
            return _csv_response(month, team_ids)
        # Teams are matched by id: a team named like another sees only its own rows.
        visible = teams_visible(user=user)
        if slug:
            visible = visible.filter(slug=slug)
        ids: list[int | None] | None = list(visible.values_list("pk", flat=True))
        if user.sees_all_costs and not slug:
            ids = None  # finance and admins: every team, and the unattributed and unallocated lines
        closed = month_closed(month) is not None
        rows = [
            {"month": str(c.month), "team": c.team, "gpu_hours": c.gpu_hours, "cost": c.printed_cost,
             "shared_gpu_cost": to_cents(c.shared_gpu_cost), "currency": c.currency, "closed": closed}
            for c in chargeback_by_team(month=month, team_ids=ids)
        ]  # fmt: skip
        return Response(TeamChargeSerializer(rows, many=True).data)

    def finalize_response(self, request: Request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if isinstance(response, Response) and isinstance(getattr(response, "accepted_renderer", None), CsvRenderer):
            # The CSV streams past the renderers; what reaches one is an error, which is JSON and must say so.
            response.accepted_renderer, response.accepted_media_type = JSONRenderer(), JSONRenderer.media_type
        return response


class ForecastQuery(MonthQuery):
    group = serializers.ChoiceField(choices=sorted(GROUPS), default="team")
    as_of = serializers.DateField(required=False, help_text="Charges of later days are ignored (default: yesterday).")


class ForecastSerializer(serializers.Serializer):
    group = serializers.CharField()
    name = serializers.CharField()
    as_of = serializers.DateField()
    spent = serializers.DecimalField(max_digits=20, decimal_places=2)
    forecast = serializers.DecimalField(max_digits=20, decimal_places=2)
    low = serializers.DecimalField(max_digits=20, decimal_places=2)
    high = serializers.DecimalField(max_digits=20, decimal_places=2)
    currency = serializers.CharField()
    method = serializers.CharField()


class ForecastView(APIView):
    """Month-end spend forecast with its 80% interval, per team (or per project or cluster of the teams the user
    may see), from the month's charges up to the end of `as_of`."""

    permission_classes = [HasReadScope]

    @extend_schema(parameters=[ForecastQuery], responses=ForecastSerializer(many=True))
    def get(self, request: Request):
        user = signed_in_user(request)
        query = ForecastQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        v = query.validated_data
        month = Month.parse(v["month"])
        visible = teams_visible(user=user)
        if v.get("team"):
            visible = visible.filter(slug=v["team"])
        everything = user.sees_all_costs and not v.get("team")
        team_ids = None if everything else list(visible.values_list("pk", flat=True))
        as_of = v.get("as_of") or last_whole_day(month, timezone.now())
        forecasts = spend_forecast(month=month, as_of=as_of, group=v["group"], team_ids=team_ids)
        rows = [f for f in forecasts if v["group"] != "team" or everything or f.key is not None]
        return Response(ForecastSerializer(rows, many=True).data)


class FootprintSerializer(serializers.Serializer):
    team = serializers.CharField()
    energy_kwh = serializers.DecimalField(max_digits=20, decimal_places=3)
    carbon_kg = serializers.DecimalField(max_digits=20, decimal_places=3)
    showback_cost = serializers.DecimalField(max_digits=20, decimal_places=2)
    currency = serializers.CharField()


class FootprintView(APIView):
    """Per team and month: energy (kWh), carbon (kg CO2e = kWh x grid intensity) and the cost shown, not billed."""

    permission_classes = [HasReadScope]

    @extend_schema(parameters=[MonthQuery], responses=FootprintSerializer(many=True))
    def get(self, request: Request):
        user = signed_in_user(request)
        query = MonthQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        month = Month.parse(query.validated_data["month"])
        visible = teams_visible(user=user)
        if query.validated_data.get("team"):
            visible = visible.filter(slug=query.validated_data["team"])
        everything = user.sees_all_costs and not query.validated_data.get("team")
        ids = None if everything else list(visible.values_list("pk", flat=True))
        return Response(FootprintSerializer(footprint_by_team(month=month, team_ids=ids), many=True).data)


class MonthCloseRequest(serializers.Serializer):
    accept_unpriced = serializers.BooleanField(
        default=False, help_text="Close even though usage of some GPU model has no rate card; kept on record."
    )


class MonthCloseView(APIView):
    """Close a month (finance, admin): its statement is frozen; 409 if it is closed already; 400 `unpriced` naming
    the cluster, model and GPU-hours no rate card prices, unless `accept_unpriced` is true."""

    permission_classes = [HasReadScope]

    @extend_schema(request=MonthCloseRequest, responses={201: dict})
    def post(self, request: Request, month: str):
        user = signed_in_user(request)
        if not user.sees_all_costs:
            return error_response(status.HTTP_403_FORBIDDEN, "permission_denied", NOT_ALLOWED.format(who="finance"))
        try:
            parsed = Month.parse(month)
        except ValueError as exc:
            return error_response(status.HTTP_400_BAD_REQUEST, "invalid", str(exc), {"month": [str(exc)]})
        options = MonthCloseRequest(data=request.data)
        options.is_valid(raise_exception=True)
        accept = options.validated_data["accept_unpriced"]
        try:
            with transaction.atomic():
                close = statement_close(month=parsed, user=user, accept_unpriced=accept)
        except ValidationError as exc:
            if exc.code == "month_closed":  # closed already: the request conflicts with the month's state
                return error_response(status.HTTP_409_CONFLICT, "month_closed", "; ".join(exc.messages))
            if exc.code == "unpriced":
                return error_response(status.HTTP_400_BAD_REQUEST, "unpriced", "; ".join(exc.messages))
            return validation_error(exc)
        body = {"month": str(parsed), "closed_at": close.closed_at, "lines": close.lines.count(),
                "unpriced_accepted": close.unpriced_accepted}  # fmt: skip
        return Response(body, status=status.HTTP_201_CREATED)


class AnomalySerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug")
    project = serializers.CharField(source="project.slug", allow_null=True, default=None)

    class Meta:
        model = Anomaly
        fields = ["id", "team", "project", "day", "metric", "value", "baseline", "score", "window_days",
                  "detected_at"]  # fmt: skip


class AnomalyFilter(filters.FilterSet):
    team = team_filter("team__slug")
    metric = filters.ChoiceFilter(choices=Anomaly.Metric.choices)
    since = filters.DateFilter(field_name="day", lookup_expr="gte")

    class Meta:
        model = Anomaly
        fields = ["team", "metric", "since"]


class AnomalyViewSet(VisibleQuerysetMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """Days whose spend, idle share or GPU-hours jumped far from their recent normal, for the teams you may see."""

    serializer_class = AnomalySerializer
    filterset_class = AnomalyFilter
    permission_classes = [HasReadScope]

    def visible(self, user: User) -> QuerySet[Anomaly]:
        return (
            Anomaly.objects.filter(team__in=teams_visible(user=user))
            .select_related("team", "project")
            .order_by("-day", "team__slug", "metric", "id")
        )


class OverClaimSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")
    token = serializers.CharField(source="token_name", help_text="The ingest token whose records claimed it.")
    jobs = serializers.ListField(child=serializers.DictField(), help_text="[{job, team, claimed, billed}]")

    class Meta:
        model = OverClaim
        fields = ["id", "cluster", "day", "gpu_model", "token", "claimed_gpu_hours", "billed_gpu_hours",
                  "overclaimed_gpu_hours", "jobs", "updated_at"]  # fmt: skip


class OverClaimFilter(filters.FilterSet):
    cluster = cluster_filter("cluster__name")
    since = filters.DateFilter(field_name="day", lookup_expr="gte")

    class Meta:
        model = OverClaim
        fields = ["cluster", "since", "gpu_model"]


class OverClaimViewSet(VisibleQuerysetMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """GPU-hours jobs claimed beyond the GPUs a cluster has (never billed), per day, model and ingest token, with
    the jobs that claimed them; admins only."""

    serializer_class = OverClaimSerializer
    filterset_class = OverClaimFilter
    permission_classes = [HasReadScope, AdminOnly]

    def visible(self, user: User) -> QuerySet[OverClaim]:
        return OverClaim.objects.select_related("cluster").order_by("-day", "cluster__name", "gpu_model", "id")


ROUTES = [
    ("overclaims", OverClaimViewSet, "overclaims"),
    ("billing-modes", api_terms.BillingModeViewSet, "billing-modes"),
    ("grid-intensity", api_terms.GridIntensityViewSet, "grid-intensity"),
    ("anomalies", AnomalyViewSet, "anomalies"),
    ("rates", api_terms.RateCardViewSet, "rates"),
    ("capacity", api_terms.CapacityViewSet, "capacity"),
    ("policies", api_terms.PolicyViewSet, "policies"),
    ("budgets", api_terms.BudgetViewSet, "budgets"),
    ("commitments", api_terms.CommitmentViewSet, "commitments"),
    ("pricing-failures", api_failures.PricingFailureViewSet, "pricing-failures"),
]


class UnattributedSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    account = serializers.CharField(help_text="The Slurm account or Kubernetes namespace no mapping names.")
    mapping_kind = serializers.CharField(help_text="The project mapping kind that would attribute it.")
    jobs = serializers.IntegerField()
    gpu_hours = serializers.DecimalField(max_digits=20, decimal_places=4)
    cost = serializers.DecimalField(max_digits=20, decimal_places=2)
    currency = serializers.CharField()


class OptionalMonthQuery(serializers.Serializer):
    month = MonthField(required=False)


class UnattributedView(generics.GenericAPIView):
    """GPU-hours billed to no team in a month, per cluster and account, largest first (finance and admins).
    Mapping the account to a project (POST /api/v1/project-mappings/) re-attributes the open months. Beside the
    list, `unpriced`: the month's GPU-hours per cluster and model that no rate card prices (billed 0)."""

    permission_classes = [HasReadScope]
    serializer_class = UnattributedSerializer
    filter_backends = [KnownQueryParameters]
    query_parameters = ("month",)

    @extend_schema(parameters=[OpenApiParameter("month", str, required=False, description="YYYY-MM; default: now")])
    def get(self, request: Request) -> Response:
        if not signed_in_user(request).sees_all_costs:
            return error_response(status.HTTP_403_FORBIDDEN, "permission_denied", NOT_ALLOWED.format(who="finance"))
        query = OptionalMonthQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        text = query.validated_data.get("month")
        month = Month.parse(text) if text else Month.of(timezone.now())
        found = unattributed(month=month)
        # Placed over every row as /costs/unattributed/ prints them, whatever page of them this is.
        rows = [{**vars(r), "cost": cost} for r, cost in zip(found, printed([r.cost for r in found]), strict=True)]
        rows = self.filter_queryset(rows)  # type: ignore[arg-type,assignment]  # refuses unknown parameters, filters none
        page: list[dict] | None = self.paginate_queryset(rows)  # type: ignore[arg-type]  # DRF pages lists too
        response = self.get_paginated_response(UnattributedSerializer(page, many=True).data)
        response.data["unpriced"] = [u.as_record() for u in unpriced_usage(month=month)]
        return response
