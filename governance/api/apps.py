from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "governance.api"
    label = "api"
    verbose_name = "API"
