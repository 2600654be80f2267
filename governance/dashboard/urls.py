from django.urls import path

from governance.dashboard.views import audit, remediation
from governance.dashboard.views import overview as views

app_name = "dashboard"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("chargeback.csv", views.chargeback_csv, name="chargeback-csv"),
    path("cluster/", views.heatmap, name="heatmap"),
    path("me/", views.me, name="me"),
    path("jobs/", views.job_search, name="job-search"),
    path("remediation/", remediation.remediation_page, name="remediation"),
    path("audit/", audit.audit_log, name="audit"),
    path("audit/audit.csv", audit.audit_log_csv, name="audit-csv"),
]
