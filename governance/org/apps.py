from django.apps import AppConfig


class OrgConfig(AppConfig):
    name = "governance.org"
    label = "org"
    verbose_name = "Teams and projects"
