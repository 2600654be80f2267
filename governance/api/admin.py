from typing import Any

from django import forms
from django.contrib import admin, messages

from governance.api.models import ApiToken, AuditEntry
from governance.api.services import TokenRefused, api_token_create, api_token_expiry, api_token_scope_check


class ApiTokenAddForm(forms.ModelForm):
    """A new token under the API's rules (scope for the holder's role, bounded expiry); the secret is made on save."""

    expires_at = forms.DateTimeField(required=False, help_text="Empty: the default lifetime (API_TOKEN_DEFAULT_DAYS).")
    clusters = forms.CharField(
        required=False, help_text="Ingest tokens: the clusters it may report, comma-separated (empty: none)."
    )

    class Meta:
        model = ApiToken
        fields = ("user", "name", "scope", "clusters", "expires_at")

    def clean_clusters(self) -> list[str]:
        return sorted({c.strip() for c in (self.cleaned_data.get("clusters") or "").split(",") if c.strip()})

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        user, scope = data.get("user"), data.get("scope")
        try:
            if user is not None and scope:
                api_token_scope_check(user=user, scope=scope)
            data["expires_at"] = api_token_expiry(expires_at=data.get("expires_at"))
        except TokenRefused as exc:
            self.add_error(exc.field, str(exc))
        if user is not None and ApiToken.objects.filter(user=user, name=data.get("name")).exists():
            self.add_error("name", f"{user} already has a token with this name.")
        return data


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Platform admins issue tokens here (ingest tokens for collectors); the secret is shown once."""

    list_display = (
        "name", "user", "scope", "clusters", "prefix", "created_at", "last_used_at", "expires_at", "revoked_at",
    )  # fmt: skip
    list_filter = ("scope",)
    readonly_fields = (
        "user", "name", "scope", "clusters", "prefix", "key_hash", "created_at", "last_used_at", "expires_at",
    )  # fmt: skip
    fields = (*readonly_fields, "revoked_at")

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = ApiTokenAddForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request, obj=None):
        return ApiTokenAddForm.Meta.fields if obj is None else self.fields

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def has_add_permission(self, request) -> bool:
        return request.user.is_active and request.user.is_platform_admin

    def has_change_permission(self, request, obj=None) -> bool:
        return request.user.is_active and request.user.is_platform_admin

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # revoke instead: the audit log keeps pointing at the token

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.is_active and request.user.is_platform_admin

    def has_module_permission(self, request) -> bool:
        return request.user.is_active and request.user.is_platform_admin

    def save_model(self, request, obj: ApiToken, form, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        data = form.cleaned_data
        token, raw = api_token_create(
            user=data["user"], name=data["name"], scope=data["scope"], clusters=data["clusters"],
            expires_at=data["expires_at"],
        )  # fmt: skip
        obj.pk, obj.prefix, obj.key_hash, obj.expires_at = token.pk, token.prefix, token.key_hash, token.expires_at
        obj._state.adding = False
        messages.warning(request, f"The token {token.name}: {raw} (copy it now; it is not shown again).")


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """Read-only: the log is written by the API, never edited by hand."""

    list_display = ("at", "actor_name", "action", "model", "object_repr")
    list_filter = ("action", "model")
    search_fields = ("actor_name", "object_repr", "object_pk")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
