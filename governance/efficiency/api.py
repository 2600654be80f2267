"""Findings API: the list as the user may see it (filters team, rule, state, job), and state changes."""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.api.auth import HasReadScope
from governance.api.errors import error_response
from governance.api.filters import IdFilter, team_filter
from governance.api.viewsets import VisibleQuerysetMixin
from governance.efficiency.models import Finding
from governance.efficiency.rules import RULES
from governance.efficiency.selectors import findings_visible
from governance.efficiency.services import FindingStateError, finding_state_set
from governance.efficiency.workloads import realised_savings
from governance.org.auth import signed_in_user
from governance.org.models import User


class FindingSerializer(serializers.ModelSerializer):
    job_id = serializers.CharField(source="job.external_id")
    job_pk = serializers.IntegerField(source="job.pk")
    cluster = serializers.CharField(source="job.cluster.name")
    team = serializers.SerializerMethodField()

    class Meta:
        model = Finding
        fields = ["id", "job_id", "job_pk", "cluster", "team", "rule", "severity", "state", "evidence", "waste",
                  "wasted_gpu_hours", "savings", "savings_from", "currency", "advice", "dismissed_reason", "created_at",
                  "updated_at", "resolved_at"]  # fmt: skip

    def get_team(self, finding: Finding) -> str | None:
        return finding.job.project.team.slug if finding.job.project else None


class StateChange(serializers.Serializer):
    state = serializers.ChoiceField(
        choices=["acknowledged", "dismissed", "resolved", "open"], help_text="open: reopen a resolved or dismissed one."
    )
    reason = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=2000, help_text="Why; required to dismiss."
    )


class FindingFilter(filters.FilterSet):
    """The filters of findings_visible, each validated here so that a bad value is a 400 naming it."""

    team = team_filter("job__project__team__slug", method="by_selector")
    rule = filters.ChoiceFilter(method="by_selector", choices=[(name, name) for name in RULES])
    state = filters.ChoiceFilter(
        method="by_selector", choices=[("live", "live (open or acknowledged)"), *Finding.State.choices]
    )
    job = filters.CharFilter(
        method="by_selector", max_length=200,
        help_text="The scheduler's job id (`1281`, on any cluster) or `cluster/id` (`c1/1281`); see `job_pk`.",
    )  # fmt: skip
    job_pk = IdFilter(method="by_selector", help_text="The job's database id (`job_pk` of a finding).")
    mine = filters.BooleanFilter(method="by_selector", help_text="Only findings on your own jobs.")

    def by_selector(self, queryset: QuerySet[Finding], name: str, value: str) -> QuerySet[Finding]:
        return queryset  # applied together in FindingListView.visible, by the selector the pages use


class FindingListView(VisibleQuerysetMixin, generics.ListAPIView):
    """Findings on the jobs you may see, most money first; paginated like every list."""

    serializer_class = FindingSerializer
    permission_classes = [HasReadScope]
    filterset_class = FindingFilter
    ordering_fields = ["waste", "savings", "created_at", "id"]

    def visible(self, user: User) -> QuerySet[Finding]:
        form = FindingFilter(self.request.query_params, queryset=Finding.objects.none(), request=self.request).form
        chosen = form.cleaned_data if form.is_valid() else {}  # an invalid filter is refused by the filter backend
        job_pk = chosen.get("job_pk")
        return findings_visible(
            user=user,
            team=chosen.get("team") or None,
            rule=chosen.get("rule") or None,
            state=chosen.get("state") or None,
            job=chosen.get("job") or None,
            job_pk=int(job_pk) if job_pk is not None else None,
            mine=bool(chosen.get("mine")),
        )


class FindingStateView(APIView):
    """Acknowledge, resolve or dismiss (with a reason) a live finding, or reopen a closed one; each change is kept
    in the finding's history (who, why) and announced to the notification destinations."""

    permission_classes = [HasReadScope]

    @extend_schema(request=StateChange, responses=FindingSerializer)
    def post(self, request: Request, pk: str, format: str | None = None) -> Response:
        finding_id, user = int(pk), signed_in_user(request)
        if not findings_visible(user=user).filter(pk=finding_id).exists():
            return error_response(status.HTTP_404_NOT_FOUND, "not_found", "No such finding.")
        change = StateChange(data=request.data)
        change.is_valid(raise_exception=True)
        try:
            with transaction.atomic():
                finding = finding_state_set(finding_id=finding_id, user=user, **change.validated_data)
        except FindingStateError as exc:
            return error_response(status.HTTP_400_BAD_REQUEST, "invalid", str(exc))
        return Response(FindingSerializer(findings_visible(user=user).get(pk=finding.pk)).data)


class RunsSerializer(serializers.Serializer):
    runs = serializers.IntegerField()
    gpu_hours_per_run = serializers.DecimalField(max_digits=16, decimal_places=2)
    sm = serializers.FloatField(help_text="Used share of the GPU-hours (0-1), from the ledger.")
    cost_per_run = serializers.DecimalField(max_digits=16, decimal_places=2)


class RealisedSerializer(serializers.Serializer):
    finding_id = serializers.IntegerField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    enough_runs = serializers.BooleanField(help_text="False: fewer than 2 runs on a side; the figures are not told.")
    before = RunsSerializer(allow_null=True)
    after = RunsSerializer(allow_null=True)
    saved_per_run = serializers.DecimalField(max_digits=16, decimal_places=2, allow_null=True)
    saved = serializers.DecimalField(max_digits=16, decimal_places=2, allow_null=True)
    currency = serializers.CharField()
    text = serializers.CharField()


NOT_MEASURED = "Not measured: the finding is not resolved, or its job is no recurring work (no workload, name or kind)."


class FindingRealisedView(APIView):
    """What taking a resolved finding's advice saved: the workload's runs after the resolution against those before
    (runs, GPU-hours, SM and cost per run), or why it cannot be told yet."""

    permission_classes = [HasReadScope]

    @extend_schema(responses=RealisedSerializer)
    def get(self, request: Request, pk: str, format: str | None = None) -> Response:
        finding = findings_visible(user=signed_in_user(request)).filter(pk=int(pk)).first()
        if finding is None:
            return error_response(status.HTTP_404_NOT_FOUND, "not_found", "No such finding.")
        realised = realised_savings(finding=finding)
        told = realised is not None and realised.enough
        return Response(
            RealisedSerializer(
                {
                    "finding_id": finding.pk,
                    "resolved_at": finding.resolved_at,
                    "enough_runs": told,
                    "before": realised.before if realised else None,
                    "after": realised.after if realised else None,
                    "saved_per_run": realised.saved_per_run if realised and told else None,
                    "saved": realised.saved if realised and told else None,
                    "currency": finding.currency,
                    "text": realised.text() if realised else NOT_MEASURED,
                }
            ).data
        )
