"""Over-claims and unconfirmed GPUs: what a pricing pass records of the claims beyond the GPUs that exist, and who
is told. The arithmetic is governance/costs/allocation.py; governance/costs/reprice.py calls these in its
transaction.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime
from decimal import Decimal

from django.conf import settings
from django.db import connection
from django.db.models import Count, Q

from governance.costs.allocation import Held, floor_hour
from governance.costs.ledger import JobFacts, quantized
from governance.costs.models import AllocatedHour, OverClaim
from governance.costs.pricing import mig_share
from governance.costs.terms import Terms
from governance.fleet.models import Cluster, Gpu
from governance.notify.services import notification_enqueue
from governance.org.models import User

EVENT = "capacity.overclaimed"
TEXT = (
    "Over-claim on {cluster}, {day}: jobs claimed {over} GPU-hours beyond the GPUs the cluster has; they are not"
    " billed. Largest: {jobs}."
)


def gpus_confirmation_refresh(*, cluster_ids: set[int], terms: Terms, now: datetime) -> int:
    """On the clusters that declare capacity, mark unconfirmed the GPUs of a model beyond its declared count (the
    count in force now): those an admin confirmed count first, then the others by first report (a GPU that
    replaces one waits for an admin too). Returns how many GPUs changed."""
    names = dict(Cluster.objects.filter(pk__in=cluster_ids).values_list("pk", "name"))
    declaring = {cid: name for cid, name in names.items() if terms.declares(name, now)}
    if not declaring or not _may_flip(declaring, terms, now):
        return 0
    rows = (
        Gpu.objects.filter(cluster_id__in=declaring)
        .order_by("first_seen_at", "id")
        .values_list("pk", "cluster_id", "model", "mig_profile", "unconfirmed", "confirmed_at")
    )
    counted: dict[tuple[int, str], Decimal] = defaultdict(Decimal)
    flips: dict[bool, list[int]] = {True: [], False: []}
    ordered = sorted(rows, key=lambda r: r[5] is None)  # admin-confirmed first, whatever the database's NULL order
    for pk, cid, model, profile, unconfirmed, confirmed_at in ordered:
        allowed = _declared_now(terms, declaring[cid], model, now)
        counted[(cid, model)] += mig_share(model, profile)
        beyond = confirmed_at is None and counted[(cid, model)] > allowed
        if beyond != unconfirmed:
            flips[beyond].append(pk)
    for value, pks in flips.items():
        if pks:
            Gpu.objects.filter(pk__in=pks).update(unconfirmed=value)
    return len(flips[True]) + len(flips[False])


def _may_flip(declaring: dict[int, str], terms: Terms, now: datetime) -> bool:
    """Whether any GPU could change side: some are unconfirmed, or a model has more than its declared count. One
    grouped read, so a pass over a large fleet that fits its declaration reads no GPU row."""
    groups = (
        Gpu.objects.filter(cluster_id__in=declaring)
        .values("cluster_id", "model", "mig_profile")
        .annotate(n=Count("id"), unconfirmed=Count("id", filter=Q(unconfirmed=True)))
        .order_by()
    )
    counted: dict[tuple[int, str], Decimal] = defaultdict(Decimal)
    for g in groups:
        if g["unconfirmed"]:
            return True
        counted[(g["cluster_id"], g["model"])] += mig_share(g["model"], g["mig_profile"]) * g["n"]
    return any(n > _declared_now(terms, declaring[cid], model, now) for (cid, model), n in counted.items())


def _declared_now(terms: Terms, cluster: str, model: str, now: datetime) -> int:
    count = 0
    for since, n in terms.declared.get((cluster, model), []):
        if since <= now:
            count = n
    return count


DELETE_HOURS = """
DELETE FROM costs_allocatedhour WHERE (job_id, day) IN (SELECT * FROM unnest(%s::int8[], %s::date[]))
"""


def allocated_hours_replace(
    *, job_days: dict[int, set[date]], held: dict[tuple[int, date], dict[tuple[int, str, str], Held]]
) -> None:
    """Keep, hour by hour, what allocation billed the jobs of contended cluster-days; drop what the job-days of
    this pass kept before (a job-day priced alone again keeps none)."""
    pairs = [(pk, d) for pk, days in job_days.items() for d in days]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(DELETE_HOURS, [[p for p, _ in pairs], [d for _, d in pairs]])
    else:
        for pk, days in job_days.items():
            AllocatedHour.objects.filter(job_id=pk, day__in=days).delete()
    rows: dict[tuple, Decimal] = defaultdict(Decimal)
    for (cid, day), by_job in held.items():
        for (pk, model, profile), h in by_job.items():
            for lo, _, billed in h.stretches:
                rows[(pk, cid, day, floor_hour(lo), model, profile)] += billed
    AllocatedHour.objects.bulk_create(
        [AllocatedHour(job_id=pk, cluster_id=cid, day=day, hour=hour, gpu_model=model, mig_profile=profile,
                       gpu_hours=quantized("gpu_hours", hours))
         for (pk, cid, day, hour, model, profile), hours in rows.items() if quantized("gpu_hours", hours) > 0],
        batch_size=2000,
    )  # fmt: skip


def overclaims_record(
    *, days: set[tuple[int, date]], held: dict[tuple[int, date], dict[tuple[int, str, str], Held]],
    jobs: dict[int, JobFacts],
) -> list[OverClaim]:  # fmt: skip
    """Replace the over-claims of these cluster-days with what allocation found: one row per cluster, day, model
    and token, naming its jobs. A cluster-day with none before and some now is announced to the admins when its
    over-claim passes GOVERNANCE_OVERCLAIM_NOTIFY_GPU_HOURS (each is recorded and listed whatever its size)."""
    if not days:
        return []
    stale = Q()
    for cid, day in days:
        stale |= Q(cluster_id=cid, day=day)
    before = set(OverClaim.objects.filter(stale).values_list("cluster_id", "day").distinct())
    OverClaim.objects.filter(stale).delete()
    groups: dict[tuple[int, date, str, int | None], list[tuple[JobFacts, Held]]] = defaultdict(list)
    for (cid, day), by_job in held.items():
        for (pk, model, _), h in by_job.items():
            if quantized("gpu_hours", h.claimed - h.billed) > 0 and pk in jobs:
                groups[(cid, day, model, jobs[pk].token_id)].append((jobs[pk], h))
    rows = []
    for (cid, day, model, token_id), parts in sorted(groups.items(), key=lambda g: (g[0][0], g[0][1], g[0][2])):
        parts.sort(key=lambda p: p[1].billed - p[1].claimed)
        claimed = sum((h.claimed for _, h in parts), Decimal(0))
        billed = sum((h.billed for _, h in parts), Decimal(0))
        rows.append(OverClaim(
            cluster_id=cid, day=day, gpu_model=model, token_id=token_id, token_name=parts[0][0].token,
            claimed_gpu_hours=quantized("gpu_hours", claimed), billed_gpu_hours=quantized("gpu_hours", billed),
            overclaimed_gpu_hours=quantized("gpu_hours", claimed - billed),
            jobs=[{"job": j.ref, "team": j.team, "claimed": str(quantized("gpu_hours", h.claimed)),
                   "billed": str(quantized("gpu_hours", h.billed))} for j, h in parts],
        ))  # fmt: skip
    OverClaim.objects.bulk_create(rows)
    _announce([r for r in rows if (r.cluster_id, r.day) not in before])
    return rows


def _announce(rows: list[OverClaim]) -> None:
    """One notification per new cluster-day over the threshold, to the admins (by email where they have one) and
    the destinations every event goes to."""
    by_day: dict[tuple[int, date], list[OverClaim]] = defaultdict(list)
    for r in rows:
        by_day[(r.cluster_id, r.day)].append(r)
    threshold = settings.GOVERNANCE_OVERCLAIM_NOTIFY_GPU_HOURS
    by_day = {k: v for k, v in by_day.items() if sum((r.overclaimed_gpu_hours for r in v), Decimal(0)) > threshold}
    if not by_day:
        return
    admins = [
        f"mailto://{email}"
        for email in User.objects.filter(role=User.Role.ADMIN, is_active=True)
        .exclude(email="")
        .values_list("email", flat=True)
    ]
    names = dict(Cluster.objects.filter(pk__in={cid for cid, _ in by_day}).values_list("pk", "name"))
    for (cid, day), found in sorted(by_day.items()):
        over = sum((r.overclaimed_gpu_hours for r in found), Decimal(0))
        jobs = [j["job"] for r in found for j in r.jobs][:5]
        payload = {
            "cluster": names.get(cid, ""), "day": day.isoformat(), "overclaimed_gpu_hours": str(over),
            "tokens": sorted({r.token_name for r in found}), "jobs": jobs,
        }  # fmt: skip
        over_text = over.quantize(Decimal("0.01"))
        text = TEXT.format(cluster=names.get(cid, ""), day=day, over=over_text, jobs=", ".join(jobs))
        notification_enqueue(event=EVENT, payload=payload, text=text, destinations=admins)
