"""An engineer's month: their jobs with cost, idle cost and the one change that would save most. The page /me/
and GET /api/v1/me/month/ read this one selector, over the ledger (costs/breakdowns.py)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings

from governance.costs.breakdowns import JobCost, jobs_month
from governance.costs.ledger import ZERO
from governance.dashboard.advice import Advice, leading_advice
from governance.efficiency.models import LIVE_STATES, Finding
from governance.lib.months import Month
from governance.org.models import User
from governance.org.selectors import teams_visible


@dataclass(frozen=True)
class MyMonth:
    month: Month
    jobs: list[JobCost]
    advice: dict[int, Advice]
    open_findings: int
    currency: str

    @property
    def cost(self) -> Decimal:
        return sum((j.cost for j in self.jobs), ZERO)

    @property
    def idle_cost(self) -> Decimal:
        return sum((j.idle_cost for j in self.jobs), ZERO)

    @property
    def costliest(self) -> JobCost | None:
        return self.jobs[0] if self.jobs else None


def my_month(*, user: User, month: Month) -> MyMonth:
    """The user's own jobs (by scheduler user name, in the teams they belong to) charged in the month, costliest
    first; the unattributed jobs of a same-named user elsewhere are not theirs to see."""
    team_ids = list(teams_visible(user=user).values_list("pk", flat=True)) if not user.sees_all_costs else None
    jobs = jobs_month(month=month, team_ids=team_ids, user_name=user.username, limit=None)
    ids = [j.job_pk for j in jobs]
    open_findings = Finding.objects.filter(job_id__in=ids, state__in=LIVE_STATES).count() if ids else 0
    currency = jobs[0].currency if jobs else settings.GOVERNANCE_DEFAULT_CURRENCY
    return MyMonth(month, jobs, leading_advice(job_ids=ids), open_findings, currency)
