"""Findings API: the list as the user may see it (filters team, rule, state, job), and state changes."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.urls import re_path
from django.utils import timezone
from django_filters import rest_framework as filters
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.api.auth import HasReadScope
from governance.api.errors import error_response
from governance.api.fields import MonthField
from governance.api.filters import IdFilter, KnownQueryParameters, team_filter
from governance.api.viewsets import VisibleQuerysetMixin
from governance.efficiency.migration import DEFAULT_DAYS, MAX_DAYS, migration_check
from governance.efficiency.models import Finding
from governance.efficiency.rules import RULES
from governance.efficiency.selectors import findings_visible
from governance.efficiency.services import FindingStateError, finding_state_set
from governance.efficiency.workloads import Taken, advice_taken, realised_savings, workload_savings
from governance.lib.money import to_cents
from governance.lib.months import Month
from governance.org.auth import signed_in_user
from governance.org.models import Project, Team, User
from governance.org.selectors import can_see_team_detail, teams_visible


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


class WorkloadSavingsSerializer(serializers.Serializer):
    finding_id = serializers.IntegerField()
    recurring = serializers.BooleanField(
        help_text="False: the job is its own workload (or the only run in the window)."
    )
    labelled_by = serializers.CharField(allow_null=True, help_text="The label naming it: workload, name or kind.")
    name = serializers.CharField(allow_null=True)
    project = serializers.CharField(allow_null=True)
    runs = serializers.IntegerField(allow_null=True)
    since = serializers.DateField(allow_null=True)
    cost = serializers.DecimalField(max_digits=16, decimal_places=2, allow_null=True)
    savings = serializers.DecimalField(max_digits=16, decimal_places=2, allow_null=True)
    currency = serializers.CharField()
    text = serializers.CharField()


class FindingWorkloadView(APIView):
    """The finding's rule over its workload's runs in the savings window: what the recurring work cost and what
    following the advice would have saved across it (each run's own share, so it adds up)."""

    permission_classes = [HasReadScope]

    @extend_schema(responses=WorkloadSavingsSerializer)
    def get(self, request: Request, pk: str, format: str | None = None) -> Response:
        finding = findings_visible(user=signed_in_user(request)).filter(pk=int(pk)).first()
        if finding is None:
            return error_response(status.HTTP_404_NOT_FOUND, "not_found", "No such finding.")
        found = workload_savings(finding=finding)
        data = {"finding_id": finding.pk, "recurring": found is not None, "currency": finding.currency}
        if found is None:
            data |= dict.fromkeys(("labelled_by", "name", "project", "runs", "since", "cost", "savings"))
            data["text"] = "Not recurring work: the job has no workload, name or kind label, or ran once in the window."
        else:
            data |= {
                "labelled_by": found.label, "name": found.name, "project": found.project, "runs": found.runs,
                "since": found.since, "cost": to_cents(found.cost), "savings": to_cents(found.savings),
                "text": found.text(),
            }  # fmt: skip
        return Response(WorkloadSavingsSerializer(data).data)


class TakenSerializer(serializers.Serializer):
    finding_id = serializers.IntegerField(source="finding.pk")
    job_id = serializers.CharField(source="finding.job.external_id")
    cluster = serializers.CharField(source="finding.job.cluster.name")
    rule = serializers.CharField(source="finding.rule")
    resolved_at = serializers.DateTimeField(source="finding.resolved_at")
    measured = serializers.BooleanField(help_text="True: enough runs on each side to tell what it saved.")
    saved = serializers.SerializerMethodField()
    text = serializers.CharField()

    @extend_schema_field(serializers.DecimalField(max_digits=16, decimal_places=2, allow_null=True))
    def get_saved(self, taken: Taken) -> str | None:
        return str(taken.realised.saved) if taken.measured and taken.realised else None


class AdviceTakenSerializer(serializers.Serializer):
    team = serializers.CharField()
    month = serializers.CharField()
    resolved = serializers.IntegerField(help_text="Findings of the team's jobs resolved in the month.")
    measured = serializers.IntegerField(help_text="Of them, those with enough runs after to tell what they saved.")
    saved = serializers.DecimalField(max_digits=16, decimal_places=2, help_text="Sum over the measured ones, so far.")
    currency = serializers.CharField()
    text = serializers.CharField()
    findings = TakenSerializer(many=True)


class AdviceTakenQuery(serializers.Serializer):
    month = MonthField(required=False)


class TeamAdviceTakenView(generics.GenericAPIView):
    """A team's month: the findings of its jobs resolved in it and what taking their advice has saved so far,
    measured on the recurring work's runs after against before (leads, finance and admins)."""

    permission_classes = [HasReadScope]
    serializer_class = AdviceTakenSerializer
    filter_backends = [KnownQueryParameters]
    query_parameters = ("month",)

    @extend_schema(parameters=[OpenApiParameter("month", str, required=False, description="YYYY-MM; default: now")])
    def get(self, request: Request, slug: str, format: str | None = None) -> Response:
        self.filter_queryset(Finding.objects.none())  # refuses unknown query parameters
        user = signed_in_user(request)
        team = Team.objects.filter(slug=slug).first()
        if team is None or not can_see_team_detail(user=user, team=team):
            return error_response(status.HTTP_404_NOT_FOUND, "not_found", "No such team (or not one you lead).")
        query = AdviceTakenQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        text = query.validated_data.get("month")
        month = Month.parse(text) if text else Month.of(timezone.now())
        currency = settings.GOVERNANCE_DEFAULT_CURRENCY
        taken = advice_taken(
            findings=findings_visible(user=user, team=team.slug), first=month.start, end=month.end, currency=currency
        )
        data = {
            "team": team.slug, "month": str(month), "resolved": taken.resolved, "measured": len(taken.measured),
            "saved": to_cents(taken.saved), "currency": currency, "text": taken.text(), "findings": taken.taken,
        }  # fmt: skip
        return Response(AdviceTakenSerializer(data).data)


class MigrationSideSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    gpu_model = serializers.CharField()
    runs = serializers.IntegerField()
    gpu_hours = serializers.DecimalField(max_digits=20, decimal_places=4)
    cost = serializers.DecimalField(max_digits=20, decimal_places=2)
    cost_per_gpu_hour = serializers.DecimalField(max_digits=20, decimal_places=4, allow_null=True)
    sm = serializers.FloatField(allow_null=True, help_text="Used share of the GPU-hours (0-1).")
    idle_share = serializers.FloatField(allow_null=True, help_text="Share of the cost billed while idle (0-1).")
    gpu_hours_per_run = serializers.DecimalField(max_digits=20, decimal_places=4, allow_null=True)
    cost_per_run = serializers.DecimalField(max_digits=20, decimal_places=2, allow_null=True)
    queue_wait_hours = serializers.FloatField(allow_null=True, help_text="Mean hours from submission to start.")


class MigrationWorkloadSerializer(serializers.Serializer):
    name = serializers.CharField()
    verdict = serializers.CharField()
    sides = MigrationSideSerializer(many=True)


class MigrationSerializer(serializers.Serializer):
    project = serializers.CharField(source="project.slug")
    first = serializers.DateField()
    last = serializers.DateField()
    currency = serializers.CharField()
    compared = serializers.BooleanField(help_text="True: the project ran on more than one cluster or GPU model.")
    summary = serializers.CharField()
    sides = MigrationSideSerializer(many=True)
    workloads = MigrationWorkloadSerializer(many=True)


class MigrationQuery(serializers.Serializer):
    days = serializers.IntegerField(required=False, min_value=1, max_value=MAX_DAYS, default=DEFAULT_DAYS)


class ProjectMigrationView(generics.GenericAPIView):
    """A project's work per cluster and GPU model over the last `days` days, side by side per recurring workload,
    with a verdict in words (the migration check; the same as /projects/<slug>/migration/ and its CSV)."""

    permission_classes = [HasReadScope]
    serializer_class = MigrationSerializer
    filter_backends = [KnownQueryParameters]
    query_parameters = ("days",)

    @extend_schema(parameters=[OpenApiParameter("days", int, required=False, description="1-366; default 90")])
    def get(self, request: Request, slug: str, format: str | None = None) -> Response:
        self.filter_queryset(Finding.objects.none())  # refuses unknown query parameters
        project = Project.objects.select_related("team").filter(slug=slug).first()
        if project is None or not teams_visible(user=signed_in_user(request)).filter(pk=project.team_id).exists():
            return error_response(status.HTTP_404_NOT_FOUND, "not_found", "No such project.")
        query = MigrationQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        check = migration_check(project=project, days=query.validated_data["days"])
        data = {
            "project": project, "first": check.first, "last": check.last, "currency": check.currency,
            "compared": check.compared, "summary": check.summary(), "sides": check.sides, "workloads": check.workloads,
        }  # fmt: skip
        return Response(MigrationSerializer(data).data)


URLS = [
    re_path(r"^findings/(?P<pk>-?\d+)/workload/$", FindingWorkloadView.as_view(), name="finding-workload"),
    # Any slug reaches the view, so an unknown one is a 404 in the API's error shape, not Django's HTML page.
    re_path(r"^teams/(?P<slug>[^/]+)/advice-taken/$", TeamAdviceTakenView.as_view(), name="team-advice-taken"),
    re_path(r"^projects/(?P<slug>[^/]+)/migration/$", ProjectMigrationView.as_view(), name="project-migration"),
]
