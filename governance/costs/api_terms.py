"""The cost terms under /api/v1/: rate cards, capacity, policies, billing modes, grid intensity, commitments and
budgets. Each is listed and created through its cost service, which refuses what would re-price a closed month."""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django_filters import rest_framework as filters
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from governance.api.auth import HasReadScope
from governance.api.errors import error_response
from governance.api.fields import MonthField
from governance.api.filters import cluster_filter, team_filter
from governance.api.permissions import AdminWrites
from governance.api.viewsets import VisibleQuerysetMixin
from governance.costs.models import (
    BillingModeTerm,
    Budget,
    Commitment,
    DeclaredCapacity,
    GridIntensity,
    RateCard,
    UnallocatedPolicyTerm,
)
from governance.costs.services import (
    MonthClosed,
    billing_mode_set,
    budget_set,
    capacity_set,
    commitment_set,
    grid_intensity_set,
    policy_set,
    rate_card_set,
)
from governance.lib.months import Month
from governance.org.auth import signed_in_user
from governance.org.models import Team, User
from governance.org.selectors import teams_led

NOT_ALLOWED = "Only {who} may do this."


def validation_error(exc: ValidationError) -> Response:
    """A term dated into a closed month is a bad request (400, code month_closed) that names the month."""
    name = "month_closed" if isinstance(exc, MonthClosed) or exc.code == "month_closed" else "invalid"
    return error_response(status.HTTP_400_BAD_REQUEST, name, "; ".join(exc.messages))


class RateCardSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name", allow_null=True, required=False, default=None)

    class Meta:
        model = RateCard
        fields = ["id", "gpu_model", "cluster", "price_per_gpu_hour", "currency", "energy_price_per_kwh", "valid_from"]
        read_only_fields = ["id"]
        validators: list = []  # the service validates (closed months, one currency) and upserts


class CapacitySerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")

    class Meta:
        model = DeclaredCapacity
        fields = ["id", "cluster", "gpu_model", "count", "valid_from"]
        read_only_fields = ["id"]
        validators: list = []


class PolicySerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")

    class Meta:
        model = UnallocatedPolicyTerm
        fields = ["id", "cluster", "policy", "valid_from", "created_at"]
        read_only_fields = ["id", "created_at"]
        validators: list = []


class BudgetSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", queryset=Team.objects.all())
    month = MonthField()

    class Meta:
        model = Budget
        fields = ["id", "team", "month", "amount", "currency", "thresholds", "webhook_url"]
        read_only_fields = ["id"]
        validators: list = []

    def to_representation(self, instance: Budget) -> dict:
        data = super().to_representation(instance)
        data["month"] = f"{instance.month:%Y-%m}"
        return data


class ClusterNameFilter(filters.FilterSet):
    cluster = cluster_filter("cluster__name")


class RateCardFilter(ClusterNameFilter):
    class Meta:
        model = RateCard
        fields = ["gpu_model", "cluster", "currency"]


class CapacityFilter(ClusterNameFilter):
    class Meta:
        model = DeclaredCapacity
        fields = ["gpu_model", "cluster"]


class PolicyFilter(ClusterNameFilter):
    class Meta:
        model = UnallocatedPolicyTerm
        fields = ["cluster", "policy"]


class BudgetFilter(filters.FilterSet):
    team = team_filter("team__slug")

    class Meta:
        model = Budget
        fields = ["team"]


class TermViewSet(VisibleQuerysetMixin, mixins.ListModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet):
    """List and create through a cost service (which refuses what would re-price a closed month), audited."""

    permission_classes = [HasReadScope, AdminWrites]

    def write(self, request: Request, data: dict):
        raise NotImplementedError

    def create(self, request: Request, *args, **kwargs) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            with transaction.atomic():
                row = self.write(request, serializer.validated_data)
        except ValidationError as exc:
            return validation_error(exc)
        return Response(self.get_serializer(row).data, status=status.HTTP_201_CREATED)


def _everyone_signed_in(user: User, rows: QuerySet) -> QuerySet:
    return rows if user.is_authenticated and user.is_active else rows.none()


class RateCardViewSet(TermViewSet):
    """Rate cards (effective-dated). POST adds one; a start inside a closed month is refused (400)."""

    serializer_class = RateCardSerializer
    filterset_class = RateCardFilter

    def visible(self, user: User) -> QuerySet[RateCard]:
        return _everyone_signed_in(
            user, RateCard.objects.select_related("cluster").order_by("gpu_model", "valid_from", "id")
        )

    def write(self, request: Request, v: dict) -> RateCard:
        return rate_card_set(
            gpu_model=v["gpu_model"], price=v["price_per_gpu_hour"], currency=v.get("currency", "USD"),
            valid_from=v["valid_from"], cluster=(v.get("cluster") or {}).get("name"),
            energy_price_per_kwh=v.get("energy_price_per_kwh"),
        )  # fmt: skip


class CapacityViewSet(TermViewSet):
    """Declared capacity per cluster and GPU model (for clusters no collector reports), effective-dated."""

    serializer_class = CapacitySerializer
    filterset_class = CapacityFilter

    def visible(self, user: User) -> QuerySet[DeclaredCapacity]:
        rows = DeclaredCapacity.objects.select_related("cluster").order_by("cluster__name", "gpu_model", "valid_from")
        return _everyone_signed_in(user, rows)

    def write(self, request: Request, v: dict) -> DeclaredCapacity:
        return capacity_set(
            cluster=v["cluster"]["name"], gpu_model=v["gpu_model"], count=v["count"], valid_from=v["valid_from"]
        )


class PolicyViewSet(TermViewSet):
    """How each cluster bills its unallocated capacity (show: its own line; share: among teams), effective-dated."""

    serializer_class = PolicySerializer
    filterset_class = PolicyFilter

    def visible(self, user: User) -> QuerySet[UnallocatedPolicyTerm]:
        rows = UnallocatedPolicyTerm.objects.select_related("cluster").order_by("cluster__name", "valid_from")
        return _everyone_signed_in(user, rows)

    def write(self, request: Request, v: dict) -> UnallocatedPolicyTerm:
        return policy_set(cluster=v["cluster"]["name"], policy=v["policy"], valid_from=v["valid_from"])


class BudgetViewSet(TermViewSet):
    """Budgets of the teams the user leads (finance and admins: all); a closed month's budget is refused."""

    serializer_class = BudgetSerializer
    filterset_class = BudgetFilter
    permission_classes = [HasReadScope]

    def visible(self, user: User) -> QuerySet[Budget]:
        return Budget.objects.filter(team__in=teams_led(user=user)).select_related("team").order_by("-month", "team")

    def create(self, request: Request, *args, **kwargs) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        if not teams_led(user=signed_in_user(request)).filter(pk=serializer.validated_data["team"].pk).exists():
            return error_response(status.HTTP_403_FORBIDDEN, "permission_denied", NOT_ALLOWED.format(who="its lead"))
        return super().create(request, *args, **kwargs)

    def write(self, request: Request, v: dict) -> Budget:
        return budget_set(
            team=v["team"], month=Month.parse(v["month"]), amount=v["amount"], currency=v.get("currency", "USD"),
            thresholds=v.get("thresholds") or None, webhook_url=v.get("webhook_url", ""),
        )  # fmt: skip


class BillingModeSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")

    class Meta:
        model = BillingModeTerm
        fields = ["id", "cluster", "mode", "valid_from"]
        read_only_fields = ["id"]
        validators: list = []


class GridIntensitySerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")
    kg_co2e_per_kwh = serializers.DecimalField(max_digits=8, decimal_places=6, required=False, allow_null=True)

    class Meta:
        model = GridIntensity
        fields = ["id", "cluster", "location", "kg_co2e_per_kwh", "source", "valid_from"]
        read_only_fields = ["id"]
        validators: list = []


class BillingModeFilter(ClusterNameFilter):
    class Meta:
        model = BillingModeTerm
        fields = ["cluster"]


class GridIntensityFilter(ClusterNameFilter):
    class Meta:
        model = GridIntensity
        fields = ["cluster"]


class BillingModeViewSet(TermViewSet):
    """Whether each cluster bills its charges or only shows them (showback), effective-dated."""

    serializer_class = BillingModeSerializer
    filterset_class = BillingModeFilter

    def visible(self, user: User) -> QuerySet[BillingModeTerm]:
        rows = BillingModeTerm.objects.select_related("cluster").order_by("cluster__name", "valid_from")
        return _everyone_signed_in(user, rows)

    def write(self, request: Request, v: dict) -> BillingModeTerm:
        return billing_mode_set(cluster=v["cluster"]["name"], mode=v["mode"], valid_from=v["valid_from"])


class GridIntensityViewSet(TermViewSet):
    """The grid carbon intensity of each cluster (given, or its country's from the shipped dataset), effective-dated."""

    serializer_class = GridIntensitySerializer
    filterset_class = GridIntensityFilter

    def visible(self, user: User) -> QuerySet[GridIntensity]:
        rows = GridIntensity.objects.select_related("cluster").order_by("cluster__name", "valid_from")
        return _everyone_signed_in(user, rows)

    def write(self, request: Request, v: dict) -> GridIntensity:
        return grid_intensity_set(cluster=v["cluster"]["name"], valid_from=v["valid_from"],
                                  location=v.get("location", ""), kg_co2e_per_kwh=v.get("kg_co2e_per_kwh"),
                                  source=v.get("source", ""))  # fmt: skip


class CommitmentSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", queryset=Team.objects.all())
    cluster = serializers.CharField(source="cluster.name")

    class Meta:
        model = Commitment
        fields = ["id", "name", "team", "cluster", "gpu_model", "gpus", "price_per_gpu_hour",
                  "contracted_discount_percent", "currency", "start", "end", "created_at"]  # fmt: skip
        read_only_fields = ["id", "created_at"]
        validators: list = []


class CommitmentFilter(ClusterNameFilter):
    team = team_filter("team__slug")

    class Meta:
        model = Commitment
        fields = ["team", "cluster", "gpu_model"]


class CommitmentViewSet(TermViewSet):
    """Reserved capacity at a committed price (admins write; finance and admins read all, leads their team's).
    A start inside a closed month is refused (400)."""

    serializer_class = CommitmentSerializer
    filterset_class = CommitmentFilter

    def visible(self, user: User) -> QuerySet[Commitment]:
        rows = Commitment.objects.filter(team__in=teams_led(user=user)).select_related("team", "cluster")
        return rows.order_by("team__slug", "cluster__name", "gpu_model", "start", "id")

    def write(self, request: Request, v: dict) -> Commitment:
        return commitment_set(
            team=v["team"], cluster=v["cluster"]["name"], gpu_model=v["gpu_model"], gpus=v["gpus"],
            price=v["price_per_gpu_hour"], start=v["start"], end=v["end"], name=v.get("name", ""),
            contracted_discount_percent=v.get("contracted_discount_percent", 0), currency=v.get("currency", "USD"),
        )  # fmt: skip
