"""Dashboard pages: parse the filters, build the charts the user may see, render."""

from __future__ import annotations

from dataclasses import replace

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from governance.costs.csv import team_month_csv
from governance.dashboard import selectors
from governance.dashboard.budgets import team_budget_states
from governance.dashboard.charts import heatmap_chart, overview_charts
from governance.dashboard.filters import RELATIVE_RANGES, Filters, filters_parse
from governance.dashboard.footprint import footprint_panel
from governance.dashboard.forecasts import forecast_panel
from governance.dashboard.me import my_month
from governance.dashboard.tables import jobs_table
from governance.lib.months import Month
from governance.lib.text import csv_safe
from governance.org.auth import signed_in_user
from governance.org.models import User
from governance.org.selectors import job_visibility_filter, teams_visible
from governance.usage.models import Job

SEARCH_LIMIT = 50
REFRESH_S = 300


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    user = signed_in_user(request)
    f = filters_parse(query=request.GET, user=user)
    charts, headline = overview_charts(f, user)
    context = {"f": f, "charts": charts, **headline, "forecast": _overview_forecast(f, user)}
    context["footprint"] = footprint_panel(month=f.month, team_ids=_overview_teams(f, user))
    context["plotly"] = bool(context["forecast"]) or any(c.has_data for c in charts)
    context["budgets"] = team_budget_states(month=f.month, spent=headline["team_costs"], now=timezone.now())
    return render(request, "dashboard/overview.html", context)


def _overview_teams(f: Filters, user: User) -> list[int] | None:
    if f.team is not None:
        return [f.team.pk]
    return None if user.sees_all_costs else list(teams_visible(user=user).values_list("pk", flat=True))


def _overview_forecast(f: Filters, user: User) -> dict | None:
    """The month-end forecast of the teams the page shows (the team filter, else every team the user may see)."""
    ids: list[int] | None
    if f.team is not None:
        ids, name = [f.team.pk], f.team.name
    else:
        ids = None if user.sees_all_costs else list(teams_visible(user=user).values_list("pk", flat=True))
        name = "All teams" if ids is None else "Your teams"
    return forecast_panel(month=f.month, team_ids=ids, name=name, title=f"Month-end forecast: {name}, {f.month}")


@login_required
def heatmap(request: HttpRequest) -> HttpResponse:
    user = signed_in_user(request)
    f = filters_parse(query=request.GET, user=user)
    cluster = f.cluster or (f.clusters.first() if f.clusters is not None else None)
    # A node's own GPUs: the drill-down from a heatmap whose rows are nodes.
    node = request.GET.get("node", "").replace("\x00", "").strip()[:200] or None
    charts, grid = [], None
    if cluster is not None:
        chart, grid = heatmap_chart(f, cluster, user, node=node)
        charts = [chart]
    context = {"f": f, "cluster": cluster, "charts": charts, "ranges": RELATIVE_RANGES, "refresh": REFRESH_S,
               "grid": grid, "node": node, "plotly": any(c.has_data for c in charts)}  # fmt: skip
    return render(request, "dashboard/heatmap.html", context)


@login_required
def chargeback_csv(request: HttpRequest) -> StreamingHttpResponse:
    user = signed_in_user(request)
    f = filters_parse(query=request.GET, user=user)
    charges = selectors.team_charges(user=user, months=f.months, team=f.team)
    charges = [replace(c, team=csv_safe(c.team)) for c in charges]
    response = StreamingHttpResponse(team_month_csv(charges), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="chargeback-{f.months[0]}-to-{f.months[-1]}.csv"'
    return response


def _month(request: HttpRequest) -> Month:
    try:
        return Month.parse(request.GET["month"]) if request.GET.get("month") else Month.of(timezone.now())
    except ValueError:
        return Month.of(timezone.now())


@login_required
def me(request: HttpRequest) -> HttpResponse:
    month = _month(request)
    mine = my_month(user=signed_in_user(request), month=month)
    context = {
        "month": month, "mine": mine, "previous": month.previous(),
        "next": month.next() if month.end <= timezone.now() else None,
        "table": jobs_table("my-jobs", f"My jobs in {month}, costliest first", mine.jobs, mine.advice, team=False,
                           adds_up=True),
    }  # fmt: skip
    return render(request, "dashboard/me.html", context)


@login_required
def job_search(request: HttpRequest) -> HttpResponse:
    """Jobs by scheduler id (exact, then prefix), among the jobs the user may see; one match opens it."""
    q = request.GET.get("q", "").replace("\x00", "").strip()[:200]
    jobs = []
    if q:
        user = signed_in_user(request)
        visible = Job.objects.filter(job_visibility_filter(user=user)).select_related("cluster", "project")
        exact = list(visible.filter(external_id=q)[:SEARCH_LIMIT])
        jobs = exact or list(visible.filter(external_id__startswith=q).order_by("-start_time")[:SEARCH_LIMIT])
        if len(jobs) == 1:
            return redirect("efficiency:job", jobs[0].pk)
    return render(request, "dashboard/job_search.html", {"q": q, "jobs": jobs})
