"""Jobs re-attributed after project mappings changed: each job's project resolved again, its history recorded, and its
days marked for pricing under the new team."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Max, Min, Q
from django.utils import timezone

from governance.lib.enqueue import enqueue_on_commit
from governance.org.services import project_ids_resolver
from governance.usage.history import JobVersion, job_changes_record
from governance.usage.marks import job_days_mark
from governance.usage.models import Job, JobGpuHour

# The charge ledger's re-pricing (governance/costs), enqueued by name: usage never imports costs.
REPRICE_TASK = "costs.reprice"

HISTORY_FIELDS = ("project_id", "user_name", "gpus", "start_time", "end_time", "state")


def jobs_remap(*, accounts: Iterable[str] | None = None) -> int:
    """Resolve the project of jobs again after project mappings changed (jobs naming `accounts`, or all);
    returns how many changed project. A job that no mapping or project names any more becomes unattributed.

    Closed months keep their frozen lines: a change to one shows as an adjustment in the open month.
    """
    # Described jobs, and pods known only from samples (their account is their namespace).
    jobs = Job.objects.filter(Q(described=True) | ~Q(account=""))
    if accounts is not None:
        jobs = jobs.filter(account__in=set(accounts))
    resolve = project_ids_resolver()
    moved: dict[int | None, list[int]] = defaultdict(list)
    rows = jobs.values_list("pk", "account", "team_name", "cluster__name", "project_id")
    for pk, account, team, cluster, project_id in rows.iterator(chunk_size=5000):
        now_project = resolve(account, team or None, cluster)
        if now_project != project_id:
            moved[now_project].append(pk)
    with transaction.atomic():
        every = [pk for pks in moved.values() for pk in pks]
        facts = Job.objects.filter(pk__in=every).values("pk", "cluster__name", "external_id", *HISTORY_FIELDS)
        was = {f["pk"]: f for f in facts}
        for target, pks in moved.items():
            Job.objects.filter(pk__in=pks).update(project_id=target, updated_at=timezone.now())
        job_changes_record(versions=[
            JobVersion(pk, f"{was[pk]['cluster__name']}/{was[pk]['external_id']}", was[pk],
                       {**was[pk], "project_id": target})
            for target, pks in moved.items() for pk in pks if pk in was
        ])  # fmt: skip
        # Every day of a moved job is billed to its new team: open months directly, closed ones as corrections.
        job_days_mark(_job_spans(every))
        if every:
            enqueue_on_commit(REPRICE_TASK)
    return sum(len(pks) for pks in moved.values())


def _job_spans(pks: list[int]) -> list[tuple[int, int, datetime | None, datetime | None]]:
    """(job, cluster, start, end) of each job: its scheduler's times, or for a pod known only from its samples
    (no start time) the hours they cover."""
    spans = list(Job.objects.filter(pk__in=pks).values_list("pk", "cluster_id", "start_time", "end_time"))
    unknown = [pk for pk, _, start, _ in spans if start is None]
    seen = {
        pk: (first, last + timedelta(hours=1))
        for pk, first, last in JobGpuHour.objects.filter(job_id__in=unknown)
        .values("job_id")
        .annotate(first=Min("hour"), last=Max("hour"))
        .values_list("job_id", "first", "last")
    }
    return [(pk, cluster, *seen[pk]) if start is None and pk in seen else (pk, cluster, start, end)
            for pk, cluster, start, end in spans]  # fmt: skip
