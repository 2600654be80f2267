from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.template.response import TemplateResponse

from governance.api.audit import MachineRecordAdmin, audited_action
from governance.usage.ingest_health import ingest_health
from governance.usage.models import CollectorStatus, IngestBatch, Job
from governance.usage.services import inbox_requeue


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("external_id", "cluster", "user_name", "project", "gpus", "gpu_model", "state", "start_time")
    list_filter = ("cluster", "state", "gpu_model")
    search_fields = ("external_id", "user_name", "account")
    list_select_related = ("cluster", "project")
    readonly_fields = [f.name for f in Job._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


class IngestBatchStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("pending", "Pending"), ("processed", "Processed"), ("dead", "Dead")]

    def queryset(self, request, queryset):
        if self.value() == "pending":
            return queryset.filter(processed_at__isnull=True, dead_at__isnull=True)
        if self.value() == "processed":
            return queryset.filter(processed_at__isnull=False)
        if self.value() == "dead":
            return queryset.filter(processed_at__isnull=True, dead_at__isnull=False)
        return queryset


@admin.register(IngestBatch)
class IngestBatchAdmin(MachineRecordAdmin):
    list_display = ("batch_id", "collector", "source", "record_count", "received_at", "processed_at", "attempts",
                    "dead_at")  # fmt: skip
    list_filter = (IngestBatchStateFilter, "source", "collector")
    exclude = ("body",)
    readonly_fields = ("batch_id", "collector", "source", "body_sha256", "record_count", "received_at",
                       "processed_at", "attempts", "dead_at", "last_error")  # fmt: skip
    actions = ["requeue"]

    def has_requeue_permission(self, request) -> bool:
        return bool(request.user.is_active and request.user.is_platform_admin)

    @admin.action(description="Re-queue the selected dead batches", permissions=["requeue"])
    @audited_action
    def requeue(self, request, queryset) -> None:
        count = inbox_requeue(pks=queryset.values_list("pk", flat=True))
        self.message_user(request, f"{count} dead batch(es) re-queued.", messages.SUCCESS)


@admin.register(CollectorStatus)
class IngestHealthAdmin(MachineRecordAdmin):
    """Usage > Collectors is the ingest health page: per cluster and node, per collector, and the inbox."""

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> TemplateResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request), "title": "Ingest health", "opts": self.model._meta,
            "health": ingest_health(), **(extra_context or {}),
        }  # fmt: skip
        return TemplateResponse(request, "admin/usage/ingest_health.html", context)
