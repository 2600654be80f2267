"""The job-days pricing could not price, for admins: /api/v1/pricing-failures/ (the Django admin lists them too)."""

from django.db.models import QuerySet
from rest_framework import mixins, serializers, viewsets

from governance.api.permissions import AdminOnly, HasReadScope
from governance.api.viewsets import VisibleQuerysetMixin
from governance.costs.models import PricingFailure
from governance.org.models import User


class PricingFailureSerializer(serializers.ModelSerializer):
    job = serializers.CharField(source="job.external_id", help_text="The job id its scheduler gave it.")
    cluster = serializers.CharField(source="cluster.name")

    class Meta:
        model = PricingFailure
        fields = ["id", "cluster", "job", "day", "error", "first_seen_at", "last_seen_at", "attempts"]


class PricingFailureViewSet(VisibleQuerysetMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """Job-days the pricing pass could not price, latest first; retried by the periodic pass. Admins only."""

    serializer_class = PricingFailureSerializer
    permission_classes = [HasReadScope, AdminOnly]

    def visible(self, user: User) -> QuerySet[PricingFailure]:
        # AdminOnly refuses everyone else before this runs; the schema generator asks with no user.
        return PricingFailure.objects.select_related("job", "cluster").order_by("-last_seen_at", "-id")
