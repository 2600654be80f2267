"""The cost pages under /costs/, namespace `costs` (templates name them `costs:...`)."""

from django.urls import path

from governance.dashboard.views import costs as views

app_name = "costs"

urlpatterns = [
    path("", views.month_home, name="month"),
    path("team/<slug:slug>/", views.team_month, name="team"),
    path("team/<slug:slug>/budget-request/", views.budget_request, name="budget-request"),
    path("team/<slug:slug>/chargeback.csv", views.team_csv, name="team-csv"),
    path("team/<slug:slug>/<str:table>.csv", views.team_table_csv, name="team-table"),
    path("close/<str:month>/", views.close_month, name="close"),
    path("unattributed/", views.unattributed_month, name="unattributed"),
]
