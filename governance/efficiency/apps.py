from django.apps import AppConfig


class EfficiencyConfig(AppConfig):
    name = "governance.efficiency"
    label = "efficiency"
    verbose_name = "Efficiency findings"
