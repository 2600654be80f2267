from django.contrib import admin

from governance.api.models import ApiToken, AuditEntry


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "scope", "clusters", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = ("scope",)
    readonly_fields = ("prefix", "key_hash", "created_at", "last_used_at")


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
