from django.contrib import admin

from governance.api.audit import MachineRecordAdmin
from governance.notify.models import OutboxMessage


@admin.register(OutboxMessage)
class OutboxMessageAdmin(MachineRecordAdmin):
    list_display = ("event", "destination", "status", "attempts", "next_attempt_at", "delivered_at", "created_at")
    list_filter = ("event",)
    search_fields = ("destination", "last_error")
    readonly_fields = ("event", "destination", "payload", "text", "attempts", "next_attempt_at", "last_error",
                       "delivered_at", "created_at")  # fmt: skip
