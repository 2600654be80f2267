from django.contrib import admin

from governance.api.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "scope", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = ("scope",)
    readonly_fields = ("prefix", "key_hash", "created_at", "last_used_at")
