"""Token management (for the token's owner and admins) and the audit log (admins)."""

from datetime import datetime

from django.db import transaction
from django_filters import rest_framework as filters
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from collectors.records import CLUSTER_NAME, CLUSTER_NAME_RULE, MAX_CLUSTER_NAME
from governance.api.filters import UtcIsoDateTimeFilter
from governance.api.models import ApiToken, AuditEntry
from governance.api.permissions import AdminOnly, HasReadScope, SessionOrAdminToken
from governance.api.selectors import audit_entries_visible, tokens_visible
from governance.api.services import (
    NAME_TAKEN,
    TokenRefused,
    api_token_create,
    api_token_expiry,
    api_token_revoke,
    api_token_scope_check,
    audit_entry_record,
    snapshot,
)
from governance.api.viewsets import ApiReadOnlyViewSet, VisibleQuerysetMixin
from governance.org.auth import signed_in_user
from governance.org.models import User

MAX_TOKEN_CLUSTERS = 1000


class TokenSerializer(serializers.ModelSerializer):
    user: "serializers.SlugRelatedField[User]" = serializers.SlugRelatedField(slug_field="username", read_only=True)
    clusters = serializers.ListField(
        child=serializers.RegexField(
            CLUSTER_NAME, max_length=MAX_CLUSTER_NAME, error_messages={"invalid": CLUSTER_NAME_RULE}
        ),
        max_length=MAX_TOKEN_CLUSTERS,
        required=False,
        help_text="Clusters an ingest token may report usage for; empty: none (an admin's admin token: any).",
    )

    class Meta:
        model = ApiToken
        fields = [
            "id", "name", "scope", "clusters", "prefix", "user", "created_at", "last_used_at", "expires_at",
            "revoked_at",
        ]  # fmt: skip
        read_only_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
        extra_kwargs = {
            "expires_at": {"required": False, "help_text": "Default and maximum lifetime: settings (days)."}
        }
        validators: list = []  # the (user, name) pair is checked in validate_name, naming the field

    def validate_name(self, name: str) -> str:
        if ApiToken.objects.filter(user=self.context["request"].user, name=name).exists():
            raise serializers.ValidationError(NAME_TAKEN)
        return name

    def validate_scope(self, scope: str) -> str:
        try:
            api_token_scope_check(user=self.context["request"].user, scope=scope)
        except TokenRefused as exc:
            raise serializers.ValidationError(str(exc)) from None
        return scope

    def validate_expires_at(self, expires_at: datetime | None) -> datetime:
        try:
            return api_token_expiry(expires_at=expires_at)
        except TokenRefused as exc:
            raise serializers.ValidationError(str(exc)) from None


class NewTokenSerializer(TokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The secret; shown in this response only.")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]


class TokenFilter(filters.FilterSet):
    active = filters.BooleanFilter(method="filter_active", help_text="Neither revoked nor expired.")

    class Meta:
        model = ApiToken
        fields = ["scope", "active"]

    def filter_active(self, queryset, name: str, value: bool | None):
        if value is None:
            return queryset
        active = ApiToken.objects.active().values("pk")
        return queryset.filter(pk__in=active) if value else queryset.exclude(pk__in=active)


class TokenViewSet(
    VisibleQuerysetMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Your API tokens (admins: everyone's). Create shows the secret once; delete revokes."""

    serializer_class = TokenSerializer
    filterset_class = TokenFilter
    permission_classes = [HasReadScope, SessionOrAdminToken]

    def visible(self, user: User):
        return tokens_visible(user=user)

    @extend_schema(request=TokenSerializer, responses={201: NewTokenSerializer})
    def create(self, request: Request) -> Response:
        serializer = TokenSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        via = request.auth if isinstance(request.auth, ApiToken) else None
        user = signed_in_user(request)
        with transaction.atomic():
            token, raw = api_token_create(user=user, **serializer.validated_data)
            changes = {k: [None, v] for k, v in snapshot(token).items() if k != "key_hash"}
            audit_entry_record(actor=user, token=via, action=AuditEntry.Action.CREATE, instance=token, changes=changes)
        return Response({**TokenSerializer(token).data, "token": raw}, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, pk: str | None = None) -> Response:
        via = request.auth if isinstance(request.auth, ApiToken) else None
        api_token_revoke(token=self.get_object(), actor=signed_in_user(request), via=via)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AuditEntrySerializer(serializers.ModelSerializer):
    token: "serializers.SlugRelatedField[ApiToken]" = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = AuditEntry
        fields = ["id", "at", "actor_name", "token", "action", "model", "object_pk", "object_repr", "changes"]


class AuditEntryFilter(filters.FilterSet):
    actor = filters.CharFilter(field_name="actor_name")
    since = UtcIsoDateTimeFilter(field_name="at", lookup_expr="gte")
    until = UtcIsoDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = AuditEntry
        fields = ["action", "model", "object_pk", "actor", "since", "until"]


class AuditEntryViewSet(ApiReadOnlyViewSet):
    """Every write made through the API: who, with which token, what changed, when. Admins only."""

    serializer_class = AuditEntrySerializer
    filterset_class = AuditEntryFilter
    permission_classes = [HasReadScope, AdminOnly]

    def visible(self, user: User):
        return audit_entries_visible(user=user).select_related("token")


ROUTES = [
    ("tokens", TokenViewSet, "token"),
    ("audit", AuditEntryViewSet, "audit"),
]
