"""A month's top jobs read in index order (a job of one row ranks by its row) and the few jobs with several rows
summed: the same jobs, order and amounts as the job-months grouped by job, whatever the scope and the cut."""

from decimal import Decimal

import pytest
import time_machine
from django.db.models import Max, Q, Sum

from governance.costs.breakdowns import JobCost, jobs_month
from governance.costs.ledger import UNATTRIBUTED, ZERO
from governance.costs.models import JobMonth
from governance.lib.months import Month
from governance.org.models import Team
from tests.costs.conftest import declare, set_rate
from tests.factories import H100, at, ingest, job_record, series
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db

NOV = Month(2026, 11)


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def job(job_id: str, start: str, end: str, **more) -> dict:
    return job_record(job_id=job_id, gpus=1, start_time=start, submit_time=start, end_time=end, state="completed",
                      **more)  # fmt: skip


def idle_day(job_id: str, day: str, gpu: str) -> list[dict]:
    """Samples of a GPU at 0% SM through a day: the job's day is idle."""
    return series(start=at(f"{day}T00:00:00Z"), minutes=24 * 60, every_s=3600, job_id=job_id, gpu_uuid=gpu,
                  sm_util=0.0)  # fmt: skip


def grouped(order: str, limit: int | None, **scope) -> list[JobCost]:
    """The ranking as it was read before: every job-month row of the scope grouped by job, sorted, cut."""
    rows = JobMonth.objects.filter(month=NOV.start.date())
    if "team_ids" in scope:
        rows = rows.filter(team_id__in=scope["team_ids"])
    if "user_name" in scope:
        rows = rows.filter(user_name=scope["user_name"])
    ranked = (
        rows.values("job_id")
        .annotate(h=Sum("gpu_hours"), u=Sum("used_gpu_hours"), c=Sum("cost"), i=Sum("idle_cost"), ref=Max("job_ref"),
                  cluster=Max("cluster_name"), team=Max("team_name"), project=Max("project_name"),
                  user=Max("user_name"), currency=Max("currency"), ih=Sum("idle_gpu_hours"))
        .order_by("-i" if order == "idle" else "-c", "job_id")
    )  # fmt: skip
    if order == "idle":
        ranked = ranked.filter(~Q(i=0))
    return [
        JobCost(job_pk=r["job_id"], job_ref=r["ref"], cluster=r["cluster"], team=r["team"] or UNATTRIBUTED,
                project=r["project"] or "", user=r["user"], gpu_hours=r["h"] or ZERO, used_gpu_hours=r["u"] or ZERO,
                cost=r["c"] or ZERO, idle_cost=r["i"] or ZERO, currency=r["currency"], idle_gpu_hours=r["ih"] or ZERO)
        for r in (ranked[:limit] if limit is not None else ranked)
    ]  # fmt: skip


@pytest.fixture
def renamed_mid_month(cast, cluster):
    """Job 1 (NLP, alice) runs Nov 3-6 on one GPU, idle on the 4th and 5th; then NLP is renamed and its 6th,
    idle too, is priced under the new name: two job-month rows (144 + 48 cost, 96 + 48 idle). Single-row jobs
    that outrank each of its rows but not their sum: job 3 (168 cost, no idle), job 2 (vision, bob: 120 cost, all
    of it idle); job 4 (alice) is small."""
    set_rate(H100, "2.00", since="2026-10-01")
    declare(8, since="2026-10-01")
    with time_machine.travel("2026-11-08T00:00:00Z", tick=False):
        ingest([
            job("1", "2026-11-03T00:00:00Z", "2026-11-07T00:00:00Z", user="alice"),
            job("2", "2026-11-03T00:00:00Z", "2026-11-05T12:00:00Z", user="bob", team="vision", project="detector"),
            job("3", "2026-11-03T00:00:00Z", "2026-11-06T12:00:00Z", user="carol"),
            job("4", "2026-11-03T00:00:00Z", "2026-11-03T06:00:00Z", user="alice"),
            *idle_day("1", "2026-11-04", "GPU-1"), *idle_day("1", "2026-11-05", "GPU-1"),
            *[s for day in ("2026-11-03", "2026-11-04", "2026-11-05") for s in idle_day("2", day, "GPU-2")
              if s["ts"] < "2026-11-05T12"],
        ])  # fmt: skip
        Team.objects.filter(pk=cast.nlp.pk).update(name="NLP Research")
        ingest(idle_day("1", "2026-11-06", "GPU-1"))
    return cast


def test_a_job_whose_rows_were_split_mid_month_ranks_by_their_sum(renamed_mid_month):
    rows = {r.team_name: r for r in JobMonth.objects.filter(job_ref="1")}
    split, other = JobMonth.objects.exclude(job_ref="1"), {j.job_ref: j for j in jobs_month(month=NOV, limit=None)}
    assert set(rows) == {"NLP", "NLP Research"} and {r.job_rows for r in rows.values()} == {2}
    assert all(r.job_rows == 1 for r in split)
    # The premise: a single-row job outranks each of job 1's rows, not their sum.
    assert max(r.cost for r in rows.values()) < other["3"].cost < other["1"].cost
    assert max(r.idle_cost for r in rows.values()) < other["2"].idle_cost < other["1"].idle_cost

    by_cost = jobs_month(month=NOV, limit=2)
    by_idle = jobs_month(month=NOV, order="idle", limit=2)

    assert [(j.job_ref, j.cost) for j in by_cost] == [("1", Decimal(192)), ("3", Decimal(168))]
    assert [(j.job_ref, j.idle_cost) for j in by_idle] == [("1", Decimal(144)), ("2", other["2"].idle_cost)]
    assert_billing_invariants()


@pytest.mark.parametrize("order", ["cost", "idle"])
def test_the_top_jobs_equal_the_job_months_grouped_by_job_for_every_scope_and_cut(renamed_mid_month, order):
    cast = renamed_mid_month
    scopes = [{}, {"team_ids": [cast.nlp.pk]}, {"team_ids": [cast.vision.pk]}, {"user_name": "alice"},
              {"team_ids": [cast.nlp.pk], "user_name": "alice"}]  # fmt: skip
    for scope in scopes:
        for limit in (1, 2, 3, 10, None):
            assert jobs_month(month=NOV, order=order, limit=limit, **scope) == grouped(order, limit, **scope), (
                scope,
                limit,
            )
    assert_billing_invariants()


def test_jobs_tied_on_cost_keep_the_order_of_their_ids(cast, cluster):
    set_rate(H100, "2.00", since="2026-10-01")
    declare(4, since="2026-10-01")
    with time_machine.travel("2026-11-08T00:00:00Z", tick=False):
        ingest([job(str(n), "2026-11-03T00:00:00Z", "2026-11-03T10:00:00Z") for n in (7, 5, 6)])

    top = jobs_month(month=NOV, limit=2)

    assert [j.job_ref for j in top] == [j.job_ref for j in grouped("cost", 2)]
    assert [j.job_pk for j in top] == sorted(j.job_pk for j in jobs_month(month=NOV, limit=None))[:2]
    assert_billing_invariants()
