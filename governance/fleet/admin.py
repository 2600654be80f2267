from django.contrib import admin

from governance.fleet.models import Cluster, Gpu


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ("name", "unallocated_policy")


@admin.register(Gpu)
class GpuAdmin(admin.ModelAdmin):
    list_display = ("uuid", "cluster", "node", "index", "model", "mig_profile", "numa_node", "last_seen_at")
    list_filter = ("cluster", "model")
    search_fields = ("uuid", "node__name")
    list_select_related = ("cluster", "node")

    def has_add_permission(self, request) -> bool:
        return False  # GPUs are what collectors report
