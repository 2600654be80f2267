from django.apps import AppConfig


class NotifyConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "governance.notify"
    label = "notify"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from governance.notify import tasks  # noqa: F401  (registers the tasks others name by string)
