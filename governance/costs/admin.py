from django.contrib import admin

from governance.costs.models import RateCard


@admin.register(RateCard)
class RateCardAdmin(admin.ModelAdmin):
    list_display = ("gpu_model", "cluster", "price_per_gpu_hour", "currency", "valid_from")
    list_filter = ("gpu_model", "currency", "cluster")
    date_hierarchy = "valid_from"
