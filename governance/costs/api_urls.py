"""The cost endpoints under /api/v1/ that are not viewsets (governance/api/urls.py includes them; the rate,
capacity, policy and budget viewsets are on the router, from governance/costs/api.py ROUTES)."""

from django.urls import path

from governance.costs import api

urlpatterns = [
    path("forecast/", api.ForecastView.as_view(), name="forecast"),
    path("footprint/", api.FootprintView.as_view(), name="footprint"),
    path("months/<str:month>/close/", api.MonthCloseView.as_view(), name="month-close"),
    path("unattributed/", api.UnattributedView.as_view(), name="unattributed"),
]
