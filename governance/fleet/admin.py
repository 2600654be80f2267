from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from governance.api.audit import MachineRecordAdmin, audited_action
from governance.fleet.models import Cluster, Gpu, NodeTopology
from governance.fleet.services import gpus_confirm


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ("name", "unallocated_policy")


@admin.register(Gpu)
class GpuAdmin(admin.ModelAdmin):
    list_display = (
        "uuid", "cluster", "node", "index", "model", "mig_profile", "numa_node", "unconfirmed", "introduced_by",
        "created_at", "last_seen_at",
    )  # fmt: skip
    list_filter = ("unconfirmed", "cluster", "model")
    actions = ["confirm"]
    search_fields = ("uuid", "node__name")
    list_select_related = ("cluster", "node")

    def has_add_permission(self, request) -> bool:
        return False  # GPUs are what collectors report

    def has_view_permission(self, request, obj=None) -> bool:  # platform admins see and confirm unconfirmed GPUs
        return bool(request.user.is_active and request.user.is_platform_admin)

    def has_module_permission(self, request) -> bool:
        return bool(request.user.is_active and request.user.is_platform_admin)

    @admin.action(description="Confirm: count as capacity and bill (GPUs beyond declared capacity)")
    @audited_action
    def confirm(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        done = gpus_confirm(pks=queryset.values_list("pk", flat=True))
        self.message_user(request, f"{len(done)} GPUs confirmed; their days are re-priced.", messages.SUCCESS)


@admin.register(NodeTopology)
class NodeTopologyAdmin(MachineRecordAdmin):
    list_display = ("node", "gpus", "source", "reported_at")
    list_filter = ("node__cluster", "source")
    search_fields = ("node__name",)
