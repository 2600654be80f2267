from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "governance.dashboard"
    label = "dashboard"
    verbose_name = "Dashboard"
