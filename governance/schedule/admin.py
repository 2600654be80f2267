from django.contrib import admin

from governance.api.audit import MachineRecordAdmin
from governance.schedule.models import TaskRun


@admin.register(TaskRun)
class TaskRunAdmin(MachineRecordAdmin):
    list_display = ("task", "outcome", "last_started_at", "last_finished_at", "runs", "failures", "result")
    list_filter = ("outcome",)
    readonly_fields = ("task", "outcome", "last_started_at", "last_finished_at", "runs", "failures", "result", "error")
