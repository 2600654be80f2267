from django.apps import AppConfig


class CostsConfig(AppConfig):
    name = "governance.costs"
    label = "costs"
    verbose_name = "Rates and chargeback"

    def ready(self) -> None:
        # Registered in every process (web, worker, commands), so other apps enqueue them by name.
        from governance.costs import tasks  # noqa: F401
        from governance.costs.metrics import costs_metrics
        from governance.lib.metrics import metrics_register

        metrics_register("costs", costs_metrics)
