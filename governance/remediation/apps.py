from django.apps import AppConfig


class RemediationConfig(AppConfig):
    name = "governance.remediation"
    label = "remediation"
    verbose_name = "Remediation of idle GPUs"

    def ready(self) -> None:
        # Registered in every process, so beat and the in-process scheduler find the periodic check by name.
        from governance.remediation import tasks  # noqa: F401
