"""Remediation over the API: policies (admins write; leads read those covering their teams), the cases with their
steps as the user may see them, what dry runs would have done over 30 days, and a round of the check on demand."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.api.filters import KnownQueryParameters
from governance.api.permissions import AdminOnly, AdminWrites, HasReadScope
from governance.api.viewsets import ApiModelViewSet, ApiReadOnlyViewSet
from governance.fleet.models import Cluster
from governance.org.auth import signed_in_user
from governance.org.models import Team, User
from governance.remediation.models import Remediation, RemediationPolicy, RemediationStep
from governance.remediation.policies import LIST_FIELDS, policy_problems
from governance.remediation.selectors import cases_visible, dry_run_report, policies_visible
from governance.remediation.services import remediation_check


class RemediationPolicySerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all())
    teams = serializers.SlugRelatedField(
        slug_field="slug", many=True, required=False, queryset=Team.objects.all(),
        help_text="Team slugs the policy covers; empty: every team on the cluster.",
    )  # fmt: skip
    created_by = serializers.CharField(source="created_by.username", read_only=True, allow_null=True)

    class Meta:
        model = RemediationPolicy
        fields = ["id", "name", "cluster", "mode", "condition", "idle_hours", "teams", *LIST_FIELDS, "grace_minutes",
                  "quiet_start_hour", "quiet_end_hour", "max_actions_per_hour", "scheduler", "slurm_action",
                  "api_url", "created_by", "created_at", "updated_at"]  # fmt: skip

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()
        for name in LIST_FIELDS:
            fields[name] = serializers.ListField(
                child=serializers.CharField(max_length=200), max_length=200, required=False,
                help_text=str(getattr(RemediationPolicy._meta.get_field(name), "help_text", "")),
            )  # fmt: skip
        return fields

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        fields = RemediationPolicy._meta.concrete_fields
        current = {f.name: getattr(self.instance, f.attname) for f in fields} if self.instance is not None else {}
        problems = policy_problems(current | attrs)
        if problems:
            raise serializers.ValidationError(problems)
        return attrs


class PolicyViewSet(ApiModelViewSet):
    """Remediation policies, one per cluster and purpose: `off` by default, `dry_run` to see what would be done,
    `notify` to warn only, `act` to warn twice and then act. Admins change them; every change is on the audit log."""

    serializer_class = RemediationPolicySerializer
    permission_classes = [HasReadScope, AdminWrites]

    def visible(self, user: User) -> QuerySet[RemediationPolicy]:
        return policies_visible(user=user).order_by("cluster__name", "name")

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:
        serializer.save(created_by=signed_in_user(self.request))


class RemediationStepSerializer(serializers.ModelSerializer):
    class Meta:
        model = RemediationStep
        fields = ["at", "decision", "dry_run", "deadline", "evidence", "command", "result", "gpu_hours", "cost",
                  "currency"]  # fmt: skip


class RemediationCaseSerializer(serializers.ModelSerializer):
    policy = serializers.CharField(source="policy.name")
    job_id = serializers.CharField(source="job.external_id")
    job_pk = serializers.IntegerField(source="job.pk")
    cluster = serializers.CharField(source="job.cluster.name")
    steps = RemediationStepSerializer(many=True, read_only=True)

    class Meta:
        model = Remediation
        fields = ["id", "policy", "job_id", "job_pk", "cluster", "finding", "dry_run", "stage", "outcome",
                  "first_warned_at", "second_warned_at", "deadline", "closed_at", "reclaimed_gpu_hours",
                  "reclaimed_cost", "currency", "opened_at", "steps"]  # fmt: skip


class RemediationCaseFilter(filters.FilterSet):
    policy = filters.CharFilter(field_name="policy__name", max_length=100)
    pending = filters.BooleanFilter(method="by_pending", help_text="true: warned, not yet closed.")

    class Meta:
        model = Remediation
        fields = ["policy", "stage", "outcome", "dry_run"]

    def by_pending(self, queryset: QuerySet[Remediation], name: str, value: bool) -> QuerySet[Remediation]:
        return queryset.exclude(stage="closed") if value else queryset.filter(stage="closed")


class CaseViewSet(ApiReadOnlyViewSet):
    """Each policy's cases against jobs you may see, newest first, with every step: the evidence, the warning
    times and deadline, the command and its result, the GPU-hours and money reclaimed."""

    serializer_class = RemediationCaseSerializer
    filterset_class = RemediationCaseFilter

    def visible(self, user: User) -> QuerySet[Remediation]:
        return cases_visible(user=user).prefetch_related("steps").order_by("-opened_at", "-id")


class RemediationDryRunLineSerializer(serializers.Serializer):
    policy = serializers.CharField()
    warnings = serializers.IntegerField()
    actions = serializers.IntegerField()
    gpu_hours = serializers.DecimalField(max_digits=14, decimal_places=4)
    cost = serializers.DecimalField(max_digits=14, decimal_places=2)
    currency = serializers.CharField()


class DryRunReportView(generics.ListAPIView):
    """Per policy, what its dry runs would have done over the last 30 days on the jobs you may see: warnings,
    actions, and the GPU-hours and money the actions would have reclaimed. Paged like every list."""

    permission_classes = [HasReadScope]
    serializer_class = RemediationDryRunLineSerializer
    filter_backends = [KnownQueryParameters]  # refuses unknown query parameters; filters none

    def get_queryset(self) -> Any:  # a list: DRF pages lists as it pages querysets
        return dry_run_report(user=signed_in_user(self.request))


class RemediationCheckResultSerializer(serializers.Serializer):
    policies = serializers.IntegerField()
    steps = serializers.IntegerField()


class CheckNowView(APIView):
    """Run one round of the check now (admins): what the periodic task does."""

    permission_classes = [HasReadScope, AdminOnly]

    @extend_schema(request=None, responses=RemediationCheckResultSerializer)
    def post(self, request: Request, format: str | None = None) -> Response:
        result = remediation_check()
        return Response(RemediationCheckResultSerializer({"policies": result.policies, "steps": result.steps}).data)


ROUTES = [
    ("remediation-policies", PolicyViewSet, "remediation-policy"),
    ("remediations", CaseViewSet, "remediation"),
]
