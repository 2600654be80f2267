"""Dashboard pages: parse the filters, build the charts the user may see, render."""

from __future__ import annotations

from dataclasses import replace

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render

from governance.costs.csv import team_month_csv
from governance.dashboard import selectors
from governance.dashboard.charts import heatmap_chart, overview_charts
from governance.dashboard.filters import Filters, filters_parse
from governance.dashboard.footprint import footprint_panel
from governance.dashboard.forecasts import forecast_panel
from governance.lib.text import csv_safe
from governance.org.models import User
from governance.org.selectors import teams_visible


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    f = filters_parse(query=request.GET, user=request.user)
    charts, headline = overview_charts(f, request.user)
    context = {"f": f, "charts": charts, **headline, "forecast": _overview_forecast(f, request.user)}
    context["footprint"] = footprint_panel(month=f.month, team_ids=_overview_teams(f, request.user))
    return render(request, "dashboard/overview.html", context)


def _overview_teams(f: Filters, user: User) -> list[int] | None:
    if f.team is not None:
        return [f.team.pk]
    return None if user.sees_all_costs else list(teams_visible(user=user).values_list("pk", flat=True))


def _overview_forecast(f: Filters, user: User) -> dict | None:
    """The month-end forecast of the teams the page shows (the team filter, else every team the user may see)."""
    if f.team is not None:
        ids, name = [f.team.pk], f.team.name
    else:
        ids = None if user.sees_all_costs else list(teams_visible(user=user).values_list("pk", flat=True))
        name = "All teams" if ids is None else "Your teams"
    return forecast_panel(month=f.month, team_ids=ids, name=name, title=f"Month-end forecast: {name}, {f.month}")


@login_required
def heatmap(request: HttpRequest) -> HttpResponse:
    f = filters_parse(query=request.GET, user=request.user)
    cluster = f.cluster or (f.clusters.first() if f.clusters is not None else None)
    charts = [heatmap_chart(f, cluster)] if cluster is not None else []
    return render(request, "dashboard/heatmap.html", {"f": f, "cluster": cluster, "charts": charts})


@login_required
def chargeback_csv(request: HttpRequest) -> StreamingHttpResponse:
    f = filters_parse(query=request.GET, user=request.user)
    charges = selectors.team_charges(user=request.user, months=f.months, team=f.team)
    charges = [replace(c, team=csv_safe(c.team)) for c in charges]
    response = StreamingHttpResponse(team_month_csv(charges), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="chargeback-{f.months[0]}-to-{f.months[-1]}.csv"'
    return response
