from decimal import Decimal

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone

from governance.costs.csv import team_month_csv
from governance.costs.selectors import chargeback_months
from governance.dashboard.figures.costs import CostPoint, cost_per_team_per_month
from governance.lib.months import Month
from governance.org.selectors import team_totals_filter

MONTHS_SHOWN = 6


def _months(request: HttpRequest) -> list[Month]:
    try:
        last = Month.parse(request.GET["month"]) if request.GET.get("month") else Month.of(timezone.now())
    except ValueError:
        last = Month.of(timezone.now())
    months = [last]
    for _ in range(MONTHS_SHOWN - 1):
        months.insert(0, months[0].previous())
    return months


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    months = _months(request)
    charges = chargeback_months(months=months, where=team_totals_filter(user=request.user))
    currency = charges[0].currency if charges else "USD"
    figure = cost_per_team_per_month([CostPoint(str(c.month), c.team, c.cost) for c in charges], currency)
    total = sum((c.cost for c in charges if c.month == months[-1]), Decimal(0))
    context = {
        "figure": figure,
        "charges": [c for c in charges if c.month == months[-1]],
        "month": months[-1],
        "total": total,
        "currency": currency,
        "has_data": bool(charges),
    }
    return render(request, "dashboard/overview.html", context)


@login_required
def chargeback_csv(request: HttpRequest) -> StreamingHttpResponse:
    months = _months(request)
    charges = chargeback_months(months=months, where=team_totals_filter(user=request.user))
    response = StreamingHttpResponse(team_month_csv(charges), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="chargeback-{months[0]}-to-{months[-1]}.csv"'
    return response
