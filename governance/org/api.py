"""Teams, projects, memberships and project mappings: readable as the selectors allow, written by admins."""

from typing import cast

from django.db.models import Model, QuerySet
from django_filters import rest_framework as filters
from rest_framework import serializers

from governance.api.filters import project_filter, team_filter
from governance.api.permissions import AdminWrites, HasReadScope
from governance.api.viewsets import ApiModelViewSet
from governance.org.models import TEAM_NAME_TAKEN, Membership, Project, ProjectMapping, Team, User
from governance.org.selectors import teams_visible
from governance.org.services import jobs_remap_on_commit


class TeamSerializer(serializers.ModelSerializer):
    class Meta:
        model = Team
        fields = ["id", "slug", "name", "lead_email", "created_at"]

    def validate_name(self, name: str) -> str:
        others = Team.objects.filter(name__iexact=name)
        if self.instance is not None:
            others = others.exclude(pk=self.instance.pk)
        if others.exists():
            raise serializers.ValidationError(TEAM_NAME_TAKEN)
        return name


class ProjectSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", queryset=Team.objects.all())

    class Meta:
        model = Project
        fields = ["id", "slug", "name", "team", "created_at"]


class MembershipSerializer(serializers.ModelSerializer):
    user = serializers.SlugRelatedField(slug_field="username", queryset=User.objects.all())
    team = serializers.SlugRelatedField(slug_field="slug", queryset=Team.objects.all())

    class Meta:
        model = Membership
        fields = ["id", "user", "team", "role"]


class ProjectMappingSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", queryset=Project.objects.all())

    class Meta:
        model = ProjectMapping
        fields = ["id", "kind", "value", "cluster_name", "project"]


class TeamFilter(filters.FilterSet):
    class Meta:
        model = Team
        fields = ["slug"]


class ProjectFilter(filters.FilterSet):
    team = team_filter("team__slug")

    class Meta:
        model = Project
        fields = ["slug", "team"]


class MembershipFilter(filters.FilterSet):
    team = team_filter("team__slug")
    user = filters.CharFilter(field_name="user__username")

    class Meta:
        model = Membership
        fields = ["team", "user", "role"]


class ProjectMappingFilter(filters.FilterSet):
    project = project_filter("project__slug")

    class Meta:
        model = ProjectMapping
        fields = ["kind", "value", "cluster_name", "project"]


class TeamViewSet(ApiModelViewSet):
    """Teams you can see: all for admins and finance, your own otherwise."""

    serializer_class = TeamSerializer
    filterset_class = TeamFilter
    permission_classes = [HasReadScope, AdminWrites]
    ordering_fields = ["slug", "name"]

    def visible(self, user: User) -> QuerySet[Team]:
        return Team.objects.filter(pk__in=teams_visible(user=user).values("pk")).order_by("slug")


class ProjectViewSet(ApiModelViewSet):
    serializer_class = ProjectSerializer
    filterset_class = ProjectFilter
    permission_classes = [HasReadScope, AdminWrites]
    ordering_fields = ["slug", "name"]

    def visible(self, user: User) -> QuerySet[Project]:
        return Project.objects.filter(team__in=teams_visible(user=user).values("pk")).select_related("team")


class MembershipViewSet(ApiModelViewSet):
    serializer_class = MembershipSerializer
    filterset_class = MembershipFilter
    permission_classes = [HasReadScope, AdminWrites]

    def visible(self, user: User) -> QuerySet[Membership]:
        return (
            Membership.objects.filter(team__in=teams_visible(user=user).values("pk"))
            .select_related("user", "team")
            .order_by("team__slug", "user__username", "pk")
        )


class ProjectMappingViewSet(ApiModelViewSet):
    """Scheduler accounts to projects. Saving or deleting one remaps the jobs that name its account."""

    serializer_class = ProjectMappingSerializer
    filterset_class = ProjectMappingFilter
    permission_classes = [HasReadScope, AdminWrites]

    def perform_create(self, serializer) -> None:
        super().perform_create(serializer)
        jobs_remap_on_commit(accounts=[serializer.instance.value])

    def perform_update(self, serializer) -> None:
        before = serializer.instance.value
        super().perform_update(serializer)
        jobs_remap_on_commit(accounts=[before, serializer.instance.value])

    def perform_destroy(self, instance: Model) -> None:
        value = cast(ProjectMapping, instance).value  # the queryset holds only mappings
        super().perform_destroy(instance)
        jobs_remap_on_commit(accounts=[value])

    def visible(self, user: User) -> QuerySet[ProjectMapping]:
        return (
            ProjectMapping.objects.filter(project__team__in=teams_visible(user=user).values("pk"))
            .select_related("project")
            .order_by("kind", "value", "cluster_name", "pk")
        )


ROUTES = [
    ("teams", TeamViewSet, "team"),
    ("projects", ProjectViewSet, "project"),
    ("memberships", MembershipViewSet, "membership"),
    ("project-mappings", ProjectMappingViewSet, "project-mapping"),
]
