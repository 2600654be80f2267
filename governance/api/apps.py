from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "governance.api"
    label = "api"
    verbose_name = "API"

    def ready(self) -> None:
        from governance.api import checks, schema  # noqa: F401  (registers the deploy checks and the token scheme)
        from governance.api.audit import audit_signals_connect

        audit_signals_connect()
