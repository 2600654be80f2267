from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path

from governance.api.audit import MachineRecordAdmin
from governance.efficiency.models import ClusterAlert, Finding, JobEvaluation
from governance.efficiency.rules import RULES
from governance.efficiency.thresholds import thresholds_in_force


@admin.register(Finding)
class FindingAdmin(admin.ModelAdmin):
    list_display = ("rule", "job", "severity", "state", "waste", "savings", "currency", "created_at")
    list_filter = ("rule", "severity", "state")
    search_fields = ("job__external_id", "job__user_name", "advice")
    list_select_related = ("job__cluster",)
    readonly_fields = ("job", "rule", "evidence", "waste", "wasted_gpu_hours", "savings", "currency", "advice",
                       "created_at", "updated_at", "resolved_at", "notified_at", "state_changed_by")  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def get_urls(self):
        view = self.admin_site.admin_view(self.thresholds_view)
        return [path("thresholds/", view, name="efficiency_thresholds"), *super().get_urls()]

    def thresholds_view(self, request: HttpRequest) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "title": "Efficiency rule thresholds in force",
            "thresholds": thresholds_in_force(),
            "rules": RULES,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/efficiency/thresholds.html", context)


@admin.register(JobEvaluation)
class JobEvaluationAdmin(MachineRecordAdmin):
    list_display = ("job", "evaluated_at", "final_at")
    list_select_related = ("job__cluster",)
    readonly_fields = ("job", "evaluated_at", "final_at")


@admin.register(ClusterAlert)
class ClusterAlertAdmin(MachineRecordAdmin):
    list_display = ("cluster", "utilisation_percent", "threshold_percent", "window_end", "sent_at")
    readonly_fields = ("cluster", "utilisation_percent", "threshold_percent", "window_end", "sent_at")
