from django.apps import AppConfig


class EfficiencyConfig(AppConfig):
    name = "governance.efficiency"
    label = "efficiency"
    verbose_name = "Efficiency findings"

    def ready(self) -> None:
        # Registered in every process (web, worker, commands), so other apps enqueue them by name.
        from governance.efficiency import tasks  # noqa: F401
