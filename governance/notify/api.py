"""The outbox for admins: every notification, its destination, attempts and last error."""

from django_filters import rest_framework as filters
from rest_framework import serializers

from governance.api.permissions import AdminOnly, HasReadScope
from governance.api.viewsets import ApiReadOnlyViewSet
from governance.notify.models import OutboxMessage
from governance.org.models import User


class OutboxMessageSerializer(serializers.ModelSerializer):
    status = serializers.CharField(read_only=True)

    class Meta:
        model = OutboxMessage
        fields = ["id", "event", "destination", "status", "attempts", "next_attempt_at", "last_error", "delivered_at",
                  "created_at", "payload"]  # fmt: skip


class OutboxMessageFilter(filters.FilterSet):
    class Meta:
        model = OutboxMessage
        fields = ["event"]


class OutboxMessageViewSet(ApiReadOnlyViewSet):
    """Notifications and their deliveries, newest first. Admins only."""

    serializer_class = OutboxMessageSerializer
    filterset_class = OutboxMessageFilter
    permission_classes = [HasReadScope, AdminOnly]

    def visible(self, user: User):
        # AdminOnly refuses everyone else before this runs; the schema generator asks with no user.
        return OutboxMessage.objects.order_by("-created_at", "-id")


ROUTES = [("notifications", OutboxMessageViewSet, "notification")]
