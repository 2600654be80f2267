from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "governance.usage"
    label = "usage"
    verbose_name = "Jobs and usage"

    def ready(self) -> None:
        # Registered in every process (web, worker, commands), so other apps enqueue them by name.
        from governance.usage import tasks  # noqa: F401
