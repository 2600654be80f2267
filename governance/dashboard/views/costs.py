"""Chargeback pages: a team's month (lead: detail; engineer: totals) and finance's month (all teams, close)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotAllowed,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.views.decorators.http import require_POST

from governance.costs.anomalies import team_anomalies
from governance.costs.breakdowns import Breakdown, corrections_landing, jobs_month, month_has_rows, team_breakdown
from governance.costs.breakdowns import cost_by as ledger_cost_by
from governance.costs.budget_requests import budget_request_send
from governance.costs.focus import focus_csv
from governance.costs.models import Budget, BudgetRequest, LedgerDay
from governance.costs.selectors import (
    ZERO,
    TeamCharge,
    chargeback_by_team,
    month_closed,
    reconcile,
    team_trend,
    unattributed,
)
from governance.costs.services import statement_close
from governance.costs.unpriced import unpriced_usage
from governance.dashboard.advice import group_by_job, leading_advice
from governance.dashboard.budgets import budget_state
from governance.dashboard.figures.costs import budget_bar, cost_by, cost_trend
from governance.dashboard.footprint import footprint_panel
from governance.dashboard.forecasts import forecast_panel
from governance.dashboard.tables import Table, groups_table, jobs_table, table_csv
from governance.dashboard.utilisation import clusters_share, share
from governance.efficiency.migration import projects_to_check
from governance.efficiency.selectors import findings_visible
from governance.efficiency.workloads import advice_taken
from governance.lib.format import HOURS_UNIT
from governance.lib.money import printed
from governance.lib.months import Month
from governance.org.auth import signed_in_user
from governance.org.models import Membership, Team, User
from governance.org.selectors import can_see_team, can_see_team_detail, teams_visible
from governance.remediation.selectors import reclaimed_team_month

NOTHING_TO_CLOSE = "{month} has no ledger rows: there is nothing to close."


def _month(request: HttpRequest, default: Month | None = None) -> Month:
    default = default or Month.of(timezone.now())
    try:
        return Month.parse(request.GET["month"]) if request.GET.get("month") else default
    except ValueError:
        return default


def last_complete_month() -> Month:
    return Month.of(timezone.now()).previous()


@login_required
def month_home(request: HttpRequest) -> HttpResponse:
    """Finance and admins get every team; anyone else goes to their own team's month."""
    user = signed_in_user(request)
    if user.sees_all_costs:
        return finance_month(request)
    team = teams_visible(user=user).first()
    if team is None:
        raise Http404("You belong to no team.")
    return redirect(f"{reverse('costs:team', args=[team.slug])}?month={_month(request)}")


def _finance_context(month: Month) -> dict:
    """The statement as printed: each team's line rounded once, the totals the sums of the printed lines."""
    charges = chargeback_by_team(month=month)
    slugs = dict(Team.objects.values_list("pk", "slug"))
    hours = printed([c.gpu_hours for c in charges], unit=HOURS_UNIT)
    corrections = corrections_landing(month=month)
    closed = month_closed(month)
    ended = month.end <= timezone.now()
    has_rows = month_has_rows(month)
    return {
        "month": month,
        "rows": [
            (c, slugs.get(c.team_id) if c.team_id is not None else None, h) for c, h in zip(charges, hours, strict=True)
        ],
        "total": sum((c.printed_cost for c in charges), ZERO),
        "gpu_hours": sum(hours, ZERO),
        "currency": charges[0].currency if charges else settings.GOVERNANCE_DEFAULT_CURRENCY,
        "corrections": corrections,
        "corrections_total": sum((c.printed_cost for c in corrections), ZERO),
        "closed": closed,
        "ended": ended,
        "has_rows": has_rows,
        "closable": ended and has_rows and closed is None,
        "unpriced": unpriced_usage(month=month),
        "previous": month.previous(),
        "next": month.next() if month.next().start <= timezone.now() else None,
    }


def finance_month(request: HttpRequest) -> HttpResponse:
    """Opens on the last complete month: the one finance reconciles and closes."""
    month = _month(request, default=last_complete_month())
    context = {**_finance_context(month), "reconciliation": reconcile(month=month)}
    return render(request, "costs/finance_month.html", context)


def _team(request: HttpRequest, slug: str, *, detail: bool) -> Team:
    team = get_object_or_404(Team, slug=slug)
    allowed = can_see_team_detail if detail else can_see_team
    if not allowed(user=signed_in_user(request), team=team):
        raise Http404("No such team.")
    return team


TEAM_TABLES = ("projects", "users", "models", "top-cost", "top-idle")


def team_line(team: Team, month: Month) -> TeamCharge | None:
    """The team's line on the month's statement: its cost and idle cost as every page and CSV prints them."""
    return next(iter(chargeback_by_team(month=month, team_ids=[team.pk])), None)


def team_tables(team: Team, month: Month, line: TeamCharge | None = None) -> dict[str, Table]:
    """The team page's tables, each also a CSV at /costs/team/<slug>/<id>.csv?month=; the breakdowns add up to the
    team's printed line."""

    def url(name: str) -> str:
        return f"{reverse('costs:team-table', args=[team.slug, name])}?month={month}"

    def groups(id: str, title: str, key: str, by: str) -> Table:
        rows = ledger_cost_by(month=month, team_ids=ids, by=by)
        return groups_table(id, title, key, rows, url(id), printed_as=printed_as)

    line = line or team_line(team, month)
    printed_as = (line.printed_cost, line.printed_idle_cost) if line else None
    ids = [team.pk]
    top_cost = jobs_month(month=month, team_ids=ids, order="cost")
    top_idle = jobs_month(month=month, team_ids=ids, order="idle")
    advice = leading_advice(job_ids={j.job_pk for j in [*top_cost, *top_idle]})
    return {
        "projects": groups("projects", "Cost by project", "Project", "project"),
        "users": groups("users", "Cost by user", "User", "user"),
        "models": groups("models", "Cost by GPU model", "GPU model", "model"),
        "top-cost": jobs_table("top-cost", "Top jobs by cost", top_cost, advice, url("top-cost"), team=False),
        "top-idle": jobs_table("top-idle", "Top jobs by idle cost", top_idle, advice, url("top-idle"), team=False),
    }


def printed_lines(b: Breakdown, line: TeamCharge | None) -> list[tuple[tuple[str, str], list[Decimal]]]:
    """The team's lines (project x GPU model) with hours, cost and idle cost as printed: they add up to its line."""
    keys = sorted(b.lines)
    columns = [
        printed([b.lines[k][0] for k in keys], unit=HOURS_UNIT),
        printed([b.lines[k][1] for k in keys], line.printed_cost if line else None),
        printed([b.lines[k][2] for k in keys], line.printed_idle_cost if line else None),
    ]
    return [(k, [column[n] for column in columns]) for n, k in enumerate(keys)]


@login_required
def team_month(request: HttpRequest, slug: str) -> HttpResponse:
    team = _team(request, slug, detail=False)
    month = _month(request)
    detail = can_see_team_detail(user=signed_in_user(request), team=team)
    breakdown = team_breakdown(month=month, team_id=team.pk)
    line = team_line(team, month)
    budget = Budget.objects.filter(team=team, month=month.start.date()).first()
    user = signed_in_user(request)
    context = {
        "team": team, "month": month, "b": breakdown, "detail": detail, "budget": budget,
        "previous": month.previous(), "next": month.next() if month.end <= timezone.now() else None,
        "efficiency": share(breakdown.used_gpu_hours, breakdown.gpu_hours),
        "cluster_utilisation": clusters_share(cluster_ids=_clusters_of(team, month), start=month.start,
                                              end=min(month.end, timezone.now())),
        "budget_share": breakdown.cost / budget.amount if budget and budget.amount else None,
        "cost": line.printed_cost if line else ZERO, "idle_cost": line.printed_idle_cost if line else ZERO,
    }  # fmt: skip
    context["reclaimed"] = reclaimed_team_month(team_id=team.pk, month=month)
    context["footprint"] = footprint_panel(month=month, team_ids=[team.pk])
    context["anomalies"] = team_anomalies(team_id=team.pk, first=month.start.date(), last=month.end.date())
    context["forecast"] = forecast = forecast_panel(
        month=month,
        team_ids=[team.pk],
        name=team.name,
        title=f"Month-end forecast: {team.name}, {month}",
        budget=budget.amount if budget else None,
        currency=budget.currency if budget else None,
    )
    spent = line.printed_cost if line else ZERO
    f = forecast["f"] if forecast else None
    month_over = month.end <= timezone.now()
    asked = None if budget else BudgetRequest.objects.filter(team=team, month=month.start.date()).first()
    context["budget_state"] = state = budget_state(budget=budget, spent=spent, forecast=f,
                                                   month_over=month_over, request=asked)  # fmt: skip
    context["can_ask"] = budget is None and asked is None and not month_over and _leads(user, team)
    if budget is not None:
        context["budget_chart"] = budget_bar(spent, budget.amount, budget.currency, state.colour,
                                             None if f is None or month_over else f.forecast)  # fmt: skip
    context["plotly"] = bool(detail or forecast or budget)
    if detail:
        month_last_day = timezone.localtime(min(month.end - timedelta(seconds=1), timezone.now())).date()
        trend = [(str(m), cost, idle) for m, cost, idle in team_trend(month=month, team_id=team.pk)]
        findings = findings_visible(user=signed_in_user(request), team=team.slug, state="open")
        context.update(
            by_project=cost_by("project", breakdown.by_project, breakdown.currency),
            by_model=cost_by("GPU model", breakdown.by_model, breakdown.currency),
            trend=cost_trend(trend, breakdown.currency),
            lines=printed_lines(breakdown, line),
            tables=list(team_tables(team, month, line).values()),
            findings_count=findings.count(),
            finding_groups=group_by_job(findings[:60]),
            advice_taken=advice_taken(
                findings=findings_visible(user=signed_in_user(request), team=team.slug),
                first=month.start, end=month.end, currency=breakdown.currency,
            ),
            migration_projects=projects_to_check(team_id=team.pk, today=month_last_day),
        )  # fmt: skip
    return render(request, "costs/team_month.html", context)


def _leads(user: User, team: Team) -> bool:
    """A lead of this team by membership (finance and admins see every team's detail, but lead none)."""
    return Membership.objects.filter(user=user, team=team, role=Membership.Role.LEAD).exists()


def _clusters_of(team: Team, month: Month) -> list[int]:
    """The clusters the team was billed on in the month: the ones its utilisation is set beside."""
    rows = LedgerDay.objects.filter(team_id=team.pk, month=month.start.date(), cluster_id__isnull=False)
    return sorted(set(rows.values_list("cluster_id", flat=True).order_by().distinct()))


@login_required
@require_POST
def budget_request(request: HttpRequest, slug: str) -> HttpResponse:
    """A lead asks finance and admins for the month's budget (the team page's button); on record like any write."""
    team = _team(request, slug, detail=True)
    user = signed_in_user(request)
    if not _leads(user, team):
        raise PermissionDenied("Only the team's lead asks for its budget (finance and admins set it).")
    month = _month(request)
    page = f"{reverse('costs:team', args=[team.slug])}?month={month}"
    try:
        budget_request_send(team=team, month=month, user=user, page_url=request.build_absolute_uri(page))
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    else:
        messages.success(request, f"Asked finance and the admins to set {team.name}'s budget for {month}.")
    return redirect(page + "#budget")


@login_required
def team_table_csv(request: HttpRequest, slug: str, table: str) -> StreamingHttpResponse:
    team = _team(request, slug, detail=True)
    if table not in TEAM_TABLES:
        raise Http404("No such table.")
    month = _month(request)
    response = StreamingHttpResponse(table_csv(team_tables(team, month)[table]), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{team.slug}-{month}-{table}.csv"'
    return response


@login_required
def team_csv(request: HttpRequest, slug: str) -> StreamingHttpResponse:
    team = get_object_or_404(Team, slug=slug)
    if not can_see_team_detail(user=signed_in_user(request), team=team):
        raise Http404("No such team.")
    month = _month(request)
    response = StreamingHttpResponse(focus_csv(month=month, team_ids=[team.pk]), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="chargeback-{team.slug}-{month}.csv"'
    return response


@login_required
def close_month(request: HttpRequest, month: str) -> HttpResponse:
    """GET: what closing will freeze (each team's total, the month's total, the reconciliation); POST: close."""
    if not signed_in_user(request).sees_all_costs:
        raise PermissionDenied("Only finance closes a month.")
    try:
        parsed = Month.parse(month)
    except ValueError as exc:
        return HttpResponseBadRequest(escape(str(exc)))
    if request.method == "GET":
        context = {**_finance_context(parsed), "reconciliation": reconcile(month=parsed)}
        return render(request, "costs/close_confirm.html", context)
    if request.method != "POST":
        return HttpResponseNotAllowed(["GET", "POST"])
    if not month_has_rows(parsed):
        messages.error(request, NOTHING_TO_CLOSE.format(month=parsed))
        return redirect(f"{reverse('costs:month')}?month={month}")
    try:
        accept = request.POST.get("accept_unpriced") == "1"
        statement_close(month=parsed, user=signed_in_user(request), accept_unpriced=accept)
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    else:
        messages.success(request, f"{parsed} is closed; its statement is frozen.")
    return redirect(f"{reverse('costs:month')}?month={month}")


@login_required
def unattributed_month(request: HttpRequest) -> HttpResponse:
    """Finance and admins: what the month billed to no team, largest first, with the mapping that would fix it."""
    if not signed_in_user(request).sees_all_costs:
        raise PermissionDenied("Only finance and admins see what no team was billed.")
    month = _month(request)
    rows = unattributed(month=month)
    costs = printed([r.cost for r in rows])
    context = {"month": month, "rows": list(zip(rows, costs, strict=True)), "total": sum(costs, ZERO),
               "currency": rows[0].currency if rows else "", "closed": month_closed(month),
               "unpriced": unpriced_usage(month=month)}  # fmt: skip
    return render(request, "costs/unattributed.html", context)
