"""Dashboard pages: parse the filters, build the charts the user may see, render."""

from __future__ import annotations

from dataclasses import replace

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render

from governance.costs.csv import team_month_csv
from governance.dashboard import selectors
from governance.dashboard.charts import heatmap_chart, overview_charts
from governance.dashboard.filters import filters_parse
from governance.lib.text import csv_safe


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    f = filters_parse(query=request.GET, user=request.user)
    charts, headline = overview_charts(f, request.user)
    return render(request, "dashboard/overview.html", {"f": f, "charts": charts, **headline})


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
