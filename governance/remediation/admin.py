from typing import Any

from django.contrib import admin

from governance.api.audit import MachineRecordAdmin
from governance.remediation.models import Remediation, RemediationPolicy, RemediationStep


@admin.register(RemediationPolicy)
class RemediationPolicyAdmin(admin.ModelAdmin):
    list_display = ("name", "cluster", "mode", "condition", "idle_hours", "grace_minutes", "max_actions_per_hour",
                    "created_by", "updated_at")  # fmt: skip
    list_filter = ("mode", "condition", "cluster")
    filter_horizontal = ("teams",)
    readonly_fields = ("created_by", "created_at", "updated_at")

    def save_model(self, request: Any, obj: RemediationPolicy, form: Any, change: bool) -> None:
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


class StepInline(admin.TabularInline):
    model = RemediationStep
    fields = ("at", "decision", "dry_run", "deadline", "command", "result", "gpu_hours", "cost", "evidence")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(Remediation)
class RemediationAdmin(MachineRecordAdmin):
    list_display = ("job", "policy", "dry_run", "stage", "outcome", "first_warned_at", "deadline",
                    "reclaimed_gpu_hours", "reclaimed_cost", "currency")  # fmt: skip
    list_filter = ("stage", "outcome", "dry_run", "policy")
    list_select_related = ("job__cluster", "policy__cluster")
    inlines = [StepInline]


@admin.register(RemediationStep)
class RemediationStepAdmin(MachineRecordAdmin):
    list_display = ("case", "decision", "dry_run", "at", "command", "gpu_hours", "cost")
    list_filter = ("decision", "dry_run")
