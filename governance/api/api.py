"""Token management (for the token's owner and admins) and the audit log (admins)."""

from datetime import datetime

from django.http import StreamingHttpResponse
from django_filters import rest_framework as filters
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from collectors.records import CLUSTER_NAME, CLUSTER_NAME_RULE, MAX_CLUSTER_NAME
from governance.api.audit_search import AuditEntryFilter, audit_csv
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
        token, raw = api_token_create(user=signed_in_user(request), **serializer.validated_data)
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
        fields = ["id", "at", "door", "where", "address", "actor_name", "token", "token_name", "action", "model",
                  "object_pk", "object_repr", "changes"]  # fmt: skip


class AuditEntryViewSet(ApiReadOnlyViewSet):
    """Every change, whatever its door (page, admin, API, command, ingest, task): who, with which token, from
    where, what changed, when. Admins only; append-only. `csv/` streams the same filtered entries as CSV."""

    serializer_class = AuditEntrySerializer
    filterset_class = AuditEntryFilter
    permission_classes = [HasReadScope, AdminOnly]

    def visible(self, user: User):
        return audit_entries_visible(user=user).select_related("token")

    @extend_schema(responses={(200, "text/csv"): str})
    @action(detail=False, url_path="csv")
    def csv(self, request: Request) -> StreamingHttpResponse:
        entries = self.filter_queryset(self.get_queryset()).iterator(chunk_size=2000)
        response = StreamingHttpResponse(audit_csv(entries), content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="audit.csv"'
        return response


ROUTES = [
    ("tokens", TokenViewSet, "token"),
    ("audit", AuditEntryViewSet, "audit"),
]
