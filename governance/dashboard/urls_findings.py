"""The findings, job and cluster pages, namespace `efficiency` (templates name them `efficiency:...`)."""

from django.urls import path

from governance.dashboard.views import findings as views
from governance.dashboard.views import migration

app_name = "efficiency"

urlpatterns = [
    path("jobs/<int:pk>/", views.job_detail, name="job"),
    path("findings/", views.findings_list, name="findings"),
    path("findings/bulk/", views.findings_bulk, name="findings-bulk"),
    path("findings/<int:pk>/state/", views.finding_state, name="finding-state"),
    path("clusters/<str:name>/", views.cluster_detail, name="cluster"),
    path("projects/<slug:slug>/migration/", migration.project_migration, name="migration"),
    path("projects/<slug:slug>/migration.csv", migration.project_migration_csv, name="migration-csv"),
]
