from django.contrib import admin

from governance.usage.models import IngestBatch, Job


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("external_id", "cluster", "user_name", "project", "gpus", "gpu_model", "state", "start_time")
    list_filter = ("cluster", "state", "gpu_model")
    search_fields = ("external_id", "user_name", "account")
    list_select_related = ("cluster", "project")
    readonly_fields = [f.name for f in Job._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(IngestBatch)
class IngestBatchAdmin(admin.ModelAdmin):
    list_display = ("batch_id", "collector", "record_count", "received_at", "processed_at", "attempts")
    list_filter = ("collector",)
    exclude = ("body",)
    readonly_fields = ("batch_id", "collector", "body_sha256", "record_count", "received_at", "processed_at",
                       "attempts", "last_error")  # fmt: skip

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
