"""The cost endpoints under /api/v1/ (included by governance/api/urls.py)."""

from django.urls import path

from governance.costs import api

urlpatterns = [
    path("months/<str:month>/close/", api.MonthCloseView.as_view(), name="month-close"),
    path("rates/", api.RateCardListView.as_view(), name="rates"),
    path("capacity/", api.CapacityListView.as_view(), name="capacity"),
    path("budgets/", api.BudgetListView.as_view(), name="budgets"),
]
