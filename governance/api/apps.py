from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "governance.api"
    label = "api"
    verbose_name = "API"

    def ready(self) -> None:
        from governance.api import schema  # noqa: F401  (registers the token scheme with drf-spectacular)
