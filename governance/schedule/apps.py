import os
import sys

from django.apps import AppConfig
from django.conf import settings


def serving_without_broker(argv: list[str], environ: dict[str, str]) -> bool:
    """The embedded default's web process: `manage.py runserver` (its serving child under the autoreloader),
    with the in-process scheduler on (by default: no broker, so no beat)."""
    if not settings.GOVERNANCE_INPROCESS_SCHEDULER or argv[1:2] != ["runserver"]:
        return False
    return environ.get("RUN_MAIN") == "true" or "--noreload" in argv


class ScheduleConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "governance.schedule"
    label = "schedule"
    verbose_name = "Periodic work"

    def ready(self) -> None:
        from governance.schedule import signals  # noqa: F401  (records each periodic task's runs)

        if serving_without_broker(sys.argv, dict(os.environ)):
            from governance.schedule.scheduler import scheduler_thread_start

            scheduler_thread_start()
