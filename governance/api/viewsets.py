"""Base viewsets every domain's api.py builds on.

A viewset names its model's serializer and filterset and says which rows the user may see:

    class TeamViewSet(ApiModelViewSet):
        serializer_class = TeamSerializer
        filterset_class = TeamFilter
        permission_classes = [HasReadScope, AdminWrites]

        def visible(self, user):
            return teams_visible(user=user)

`visible()` must come from the org selectors, so lists, filters, details and exports share one rule.
Writes go through `audited_save`/`audited_delete`, which record the audit log in the same transaction.
"""

from django.db.models import Model, QuerySet
from rest_framework import mixins, viewsets
from rest_framework.serializers import BaseSerializer

from governance.api.models import ApiToken
from governance.api.permissions import HasReadScope
from governance.api.services import audited_delete, audited_save
from governance.org.models import User


class VisibleQuerysetMixin:
    def visible(self, user: User) -> QuerySet:
        raise NotImplementedError(f"{type(self).__name__} must say which rows a user may see")

    def get_queryset(self) -> QuerySet:
        return self.visible(self.request.user)  # type: ignore[attr-defined]


class AuditedWritesMixin:
    def _who(self) -> tuple[User, ApiToken | None]:
        auth = self.request.auth  # type: ignore[attr-defined]
        return self.request.user, auth if isinstance(auth, ApiToken) else None  # type: ignore[attr-defined]

    def perform_create(self, serializer: BaseSerializer) -> None:
        actor, token = self._who()
        audited_save(save=serializer.save, actor=actor, token=token, instance=None)

    def perform_update(self, serializer: BaseSerializer) -> None:
        actor, token = self._who()
        audited_save(save=serializer.save, actor=actor, token=token, instance=serializer.instance)

    def perform_destroy(self, instance: Model) -> None:
        actor, token = self._who()
        audited_delete(actor=actor, token=token, instance=instance)


class ApiReadOnlyViewSet(VisibleQuerysetMixin, viewsets.ReadOnlyModelViewSet):
    permission_classes = [HasReadScope]


class ApiModelViewSet(VisibleQuerysetMixin, AuditedWritesMixin, viewsets.ModelViewSet):
    """List, detail, create, update, delete; give it a role permission (AdminWrites, FinanceWrites...)."""

    permission_classes = [HasReadScope]
    http_method_names = ["get", "post", "patch", "put", "delete", "head", "options"]


class ApiCreateListViewSet(
    VisibleQuerysetMixin,
    AuditedWritesMixin,
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    permission_classes = [HasReadScope]
