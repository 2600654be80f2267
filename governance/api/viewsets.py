"""Base viewsets every domain's api.py builds on.

A viewset names its model's serializer and filterset and says which rows the user may see:

    class TeamViewSet(ApiModelViewSet):
        serializer_class = TeamSerializer
        filterset_class = TeamFilter
        permission_classes = [HasReadScope, AdminWrites]

        def visible(self, user):
            return teams_visible(user=user)

`visible()` must come from the org selectors, so lists, filters, details and exports share one rule.
Writes are plain saves: the audit log records them (governance/api/audit.py), with the request as the door.
"""

from django.db.models import QuerySet
from rest_framework import mixins, viewsets

from governance.api.permissions import HasReadScope
from governance.org.models import User


class VisibleQuerysetMixin:
    def visible(self, user: User) -> QuerySet:
        raise NotImplementedError(f"{type(self).__name__} must say which rows a user may see")

    def get_queryset(self) -> QuerySet:
        return self.visible(self.request.user)  # type: ignore[attr-defined]


class ApiReadOnlyViewSet(VisibleQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    permission_classes = [HasReadScope]


class ApiModelViewSet(VisibleQuerysetMixin, viewsets.ModelViewSet):
    """List, detail, create, update, delete; give it a role permission (AdminWrites, FinanceWrites...)."""

    permission_classes = [HasReadScope]
    http_method_names = ["get", "post", "patch", "put", "delete", "head", "options"]


class ApiCreateListViewSet(
    VisibleQuerysetMixin,
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    permission_classes = [HasReadScope]
