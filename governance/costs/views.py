"""Chargeback pages: a team's month (lead: detail; engineer: totals) and finance's month (all teams, close)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from governance.costs.anomalies import team_anomalies
from governance.costs.focus import focus_csv
from governance.costs.models import Budget
from governance.costs.selectors import (
    ZERO,
    chargeback_by_team,
    month_closed,
    reconcile,
    team_breakdown,
    team_trend,
    unattributed,
)
from governance.costs.services import DEFAULT_THRESHOLDS, statement_close
from governance.dashboard.figures.costs import budget_gauge, cost_by, cost_trend
from governance.dashboard.footprint import footprint_panel
from governance.dashboard.forecasts import forecast_panel
from governance.lib.months import Month
from governance.org.models import Team
from governance.org.selectors import can_see_team, can_see_team_detail, teams_visible


def _month(request: HttpRequest) -> Month:
    try:
        return Month.parse(request.GET["month"]) if request.GET.get("month") else Month.of(timezone.now())
    except ValueError:
        return Month.of(timezone.now())


@login_required
def month_home(request: HttpRequest) -> HttpResponse:
    """Finance and admins get every team; anyone else goes to their own team's month."""
    if request.user.sees_all_costs:
        return finance_month(request)
    team = teams_visible(user=request.user).first()
    if team is None:
        raise Http404("You belong to no team.")
    return redirect(f"{reverse('costs:team', args=[team.slug])}?month={_month(request)}")


def finance_month(request: HttpRequest) -> HttpResponse:
    month = _month(request)
    charges = chargeback_by_team(month=month)
    slugs = dict(Team.objects.values_list("pk", "slug"))
    context = {
        "month": month,
        "rows": [(c, slugs.get(c.team_id)) for c in charges],
        "total": sum((c.cost for c in charges), ZERO),
        "currency": charges[0].currency if charges else "",
        "closed": month_closed(month),
        "ended": month.end <= timezone.now(),
        "reconciliation": reconcile(month=month),
    }
    return render(request, "costs/finance_month.html", context)


@login_required
def team_month(request: HttpRequest, slug: str) -> HttpResponse:
    team = get_object_or_404(Team, slug=slug)
    if not can_see_team(user=request.user, team=team):
        raise Http404("No such team.")
    month = _month(request)
    detail = can_see_team_detail(user=request.user, team=team)
    breakdown = team_breakdown(month=month, team_id=team.pk)
    budget = Budget.objects.filter(team=team, month=month.start.date()).first()
    context = {"team": team, "month": month, "b": breakdown, "detail": detail, "budget": budget}
    context["footprint"] = footprint_panel(month=month, team_ids=[team.pk])
    context["anomalies"] = team_anomalies(team_id=team.pk, first=month.start.date(), last=month.end.date())
    context["forecast"] = forecast_panel(
        month=month,
        team_ids=[team.pk],
        name=team.name,
        title=f"Month-end forecast: {team.name}, {month}",
        budget=budget.amount if budget else None,
        currency=budget.currency if budget else None,
    )
    if budget is not None:
        thresholds = budget.thresholds or DEFAULT_THRESHOLDS
        context["gauge"] = budget_gauge(breakdown.cost, budget.amount, budget.currency, thresholds)
    if detail:
        trend = [(str(m), cost, idle) for m, cost, idle in team_trend(month=month, team_id=team.pk)]
        context.update(
            by_project=cost_by("project", breakdown.by_project, breakdown.currency),
            by_model=cost_by("GPU model", breakdown.by_model, breakdown.currency),
            trend=cost_trend(trend, breakdown.currency),
            lines=sorted(breakdown.lines.items()),
        )
    return render(request, "costs/team_month.html", context)


@login_required
def team_csv(request: HttpRequest, slug: str) -> StreamingHttpResponse:
    team = get_object_or_404(Team, slug=slug)
    if not can_see_team_detail(user=request.user, team=team):
        raise Http404("No such team.")
    month = _month(request)
    response = StreamingHttpResponse(focus_csv(month=month, team_ids=[team.pk]), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="chargeback-{team.slug}-{month}.csv"'
    return response


@login_required
@require_POST
def close_month(request: HttpRequest, month: str) -> HttpResponse:
    if not request.user.sees_all_costs:
        raise PermissionDenied("Only finance closes a month.")
    try:
        parsed = Month.parse(month)
        statement_close(month=parsed, user=request.user)
    except ValueError:
        raise Http404("No such month.") from None
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    else:
        messages.success(request, f"{parsed} is closed; its statement is frozen.")
    return redirect(f"{reverse('costs:month')}?month={month}")


@login_required
def unattributed_month(request: HttpRequest) -> HttpResponse:
    """Finance and admins: what the month billed to no team, largest first, with the mapping that would fix it."""
    if not request.user.sees_all_costs:
        raise PermissionDenied("Only finance and admins see what no team was billed.")
    month = _month(request)
    rows = unattributed(month=month)
    context = {"month": month, "rows": rows, "total": sum((r.cost for r in rows), ZERO),
               "closed": month_closed(month)}  # fmt: skip
    return render(request, "costs/unattributed.html", context)
