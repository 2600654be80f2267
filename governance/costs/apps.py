from django.apps import AppConfig


class CostsConfig(AppConfig):
    name = "governance.costs"
    label = "costs"
    verbose_name = "Rates and chargeback"
