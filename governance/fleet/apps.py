from django.apps import AppConfig


class FleetConfig(AppConfig):
    name = "governance.fleet"
    label = "fleet"
    verbose_name = "Clusters and GPUs"
