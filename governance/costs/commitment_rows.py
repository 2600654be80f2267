"""Commitments in the ledger: which job-days a pass must price together (a commitment covers a team's jobs hour
by hour, so a change to one of them moves the others), and the commitment rows of the cluster-days it touches.
The arithmetic is governance/costs/commitments.py; governance/costs/reprice.py calls these in its transaction.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime
from decimal import Decimal

from django.db.models import Q

from governance.costs.commitments import covered_hours, day_rows, hourly_gpu_hours, usage_apply
from governance.costs.ledger import DAY, HourUse, JobFacts, day_start, month_of
from governance.costs.models import Charge
from governance.costs.terms import CommitmentTerm, TermsByMonth
from governance.fleet.models import Cluster
from governance.usage.models import Job

COMMITMENT_KINDS = [Charge.Kind.PURCHASE, Charge.Kind.UNUSED]


def _in_force(terms: TermsByMonth, cluster: str, day: date) -> list[CommitmentTerm]:
    return [c for c in terms.of(month_of(day)).commitments if c.in_force_on(cluster, day_start(day))]


def job_days_widen(job_days: dict[int, set[date]], cluster_days: set[tuple[int, date]], terms: TermsByMonth) -> None:
    """Add to `job_days` every job of a committed team held on a cluster-day its commitment covers, among the
    cluster-days this pass touches: the commitment shares each hour among all of them. (A job whose team changed
    is found by its priced rows, which still name the old team.)"""
    months = {month_of(d) for _, d in cluster_days} | {month_of(d) for days in job_days.values() for d in days}
    names = {c.cluster for month in months for c in terms.of(month).commitments}
    if not names:
        return
    clusters = dict(Cluster.objects.filter(name__in=names).values_list("pk", "name"))
    touched = set(cluster_days)
    on_committed = Job.objects.filter(pk__in=list(job_days), cluster_id__in=clusters).order_by()
    for pk, cid in on_committed.values_list("pk", "cluster_id"):
        touched.update((cid, d) for d in job_days[pk])
    for cid, day in touched:
        teams = {c.team_id for c in _in_force(terms, clusters.get(cid, ""), day)}
        if not teams:
            continue
        first = day_start(day)
        held = Q(cluster_id=cid, project__team_id__in=teams, start_time__lt=first + DAY) & (
            Q(end_time__isnull=True) | Q(end_time__gt=first)
        )
        ids = set(Job.objects.filter(held).values_list("pk", flat=True))
        priced = Charge.objects.filter(kind="usage", cluster_id=cid, day=day, team_id__in=teams)
        ids |= set(priced.values_list("job_id", flat=True))
        for pk in ids - {None}:
            job_days.setdefault(pk, set()).add(day)


def commitments_apply(
    rows: list[dict], jobs: dict[int, JobFacts], hours: dict[tuple[int, date], list[HourUse]],
    terms: TermsByMonth, now: datetime,
) -> list[dict]:  # fmt: skip
    """Re-cost the usage rows a commitment covers (in place) and return the commitment rows of their
    cluster-days: a purchase row and an unused row per commitment and day."""
    by_key: dict[tuple[str, date], list[dict]] = defaultdict(list)
    for row in rows:
        by_key[(row["cluster_name"], row["day"])].append(row)
    cluster_ids = {row["cluster_name"]: row["cluster_id"] for row in rows}
    out: list[dict] = []
    for (cluster, day), day_rows_ in sorted(by_key.items()):
        for c in _in_force(terms, cluster, day):
            out.extend(_apply(c, cluster_ids[cluster], day, day_rows_, jobs, hours, terms, now))
    return out


def _until(terms: TermsByMonth, day: date, now: datetime) -> datetime:
    month = month_of(day)
    return month.end if terms.closed(month) else now


def _apply(c: CommitmentTerm, cluster_id: int, day: date, rows: list[dict], jobs: dict[int, JobFacts],
           hours: dict, terms: TermsByMonth, now: datetime) -> list[dict]:  # fmt: skip
    until = _until(terms, day, now)
    mine = [r for r in rows if r["team_id"] == c.team_id and r["gpu_model"] == c.gpu_model and not r["mig_profile"]]
    by_job = {
        r["job_id"]: hourly_gpu_hours(jobs[r["job_id"]], c.gpu_model, day, until, hours.get((r["job_id"], day), []))
        for r in mine
    }
    covered = covered_hours(c, by_job)
    used_hours = used_cost = Decimal(0)
    for r in mine:
        usage_apply(r, c, covered.get(r["job_id"], Decimal(0)))
        used_hours += r["commitment_gpu_hours"]
        used_cost += r["cost"] - r["billed_cost"]
    billed = terms.of(month_of(day)).billed(c.cluster, day_start(day) + DAY)
    return day_rows(c, cluster_id, day, until, used_hours, used_cost, terms.of(month_of(day)).currency, billed)


def commitment_days_refresh(cluster_days: set[tuple[int, date]], terms: TermsByMonth, now: datetime,
                            priced: set[tuple[int, date]]) -> list[dict]:  # fmt: skip
    """Drop the commitment rows of these cluster-days; return the rows of the days no usage row was priced for
    this pass (a commitment nobody drew on: all unused)."""
    if not cluster_days:
        return []
    stale = Q()
    for cid, day in cluster_days:
        stale |= Q(cluster_id=cid, day=day)
    Charge.objects.filter(stale, kind__in=COMMITMENT_KINDS).delete()
    names = dict(Cluster.objects.filter(pk__in={c for c, _ in cluster_days}).values_list("pk", "name"))
    out = []
    for cid, day in sorted(cluster_days - priced):
        for c in _in_force(terms, names.get(cid, ""), day):
            until = _until(terms, day, now)
            billed = terms.of(month_of(day)).billed(c.cluster, day_start(day) + DAY)
            out.extend(day_rows(c, cid, day, until, Decimal(0), Decimal(0), terms.of(month_of(day)).currency, billed))
    return out
