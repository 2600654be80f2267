from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "governance.usage"
    label = "usage"
    verbose_name = "Jobs and usage"
