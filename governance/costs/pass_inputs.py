"""What a pricing pass reads of the jobs it prices: their facts, and their rollups per hour of the days priced."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import date

from django.db.models import Count, Max, Sum

from governance.costs.contention import shared_seen
from governance.costs.ledger import DAY, HourUse, JobFacts, day_start
from governance.fleet.models import Gpu
from governance.lib.run_spans import runs_of
from governance.usage.models import Job, JobGpuHour


def jobs_read(ids: Iterable[int]) -> dict[int, JobFacts]:
    ids = list(ids)
    if not ids:
        return {}
    out = {}
    rows = list(Job.objects.filter(pk__in=ids).order_by().values_list(
        "pk", "external_id", "cluster_id", "cluster__name", "user_name", "gpus", "gpu_model", "start_time",
        "end_time", "project_id", "project__name", "project__team_id", "project__team__name", "source_token_id",
        "source_token__name", "runs",
    ))  # fmt: skip
    profiles = _mig_profiles(ids, {r[2] for r in rows})
    for pk, ref, cid, cluster, user, gpus, model, start, end, pid, project, team_id, team, tid, tname, ran in rows:
        out[pk] = JobFacts(pk, ref, cid, cluster, user, gpus, model, start, end, pid, project or "", team_id,
                           team or "", profiles.get(pk, ""), tid, tname or "",
                           runs_of(ran, start, end) if ran else None)  # fmt: skip
    return out


def _mig_profiles(ids: list[int], cluster_ids: set[int]) -> dict[int, str]:
    """The MIG profile each job held, read only where the jobs' clusters have MIG slices: otherwise every rollup of
    every job of the pass would be read to find none."""
    if not Gpu.objects.filter(cluster_id__in=cluster_ids).exclude(mig_profile="").exists():
        return {}
    return dict(
        JobGpuHour.objects.filter(job_id__in=ids)
        .exclude(gpu__mig_profile="")
        .values("job_id")
        .annotate(profile=Max("gpu__mig_profile"))
        .values_list("job_id", "profile")
    )


def hour_use_read(jobs: dict[int, JobFacts], job_days: dict[int, set[date]]) -> dict[tuple[int, date], list[HourUse]]:
    """Each job's rollups per hour, GPU model and MIG profile, for the days being priced."""
    out: dict[tuple[int, date], list[HourUse]] = defaultdict(list)
    days = [d for pk, ds in job_days.items() if pk in jobs for d in ds]
    if not days:
        return out
    rows = (
        JobGpuHour.objects.filter(
            job_id__in=list(jobs), hour__gte=day_start(min(days)), hour__lt=day_start(max(days)) + DAY
        )
        .values("job_id", "hour", "gpu__model", "gpu__mig_profile")
        .annotate(
            n=Count("id"),
            samples=Sum("samples"),
            idle=Sum("idle_samples"),
            sm=Sum("sm_sum"),
            power=Sum("power_sum"),
            power_samples=Sum("power_samples"),
            sm_samples=Sum("sm_samples"),
        )
        .order_by()
    )
    for r in rows:
        day = r["hour"].date()
        if day in job_days[r["job_id"]]:
            out[(r["job_id"], day)].append(
                HourUse(
                    r["hour"],
                    r["gpu__model"],
                    r["gpu__mig_profile"],
                    r["n"],
                    r["samples"] or 0,
                    r["idle"] or 0,
                    r["sm"] or 0.0,
                    r["power"] or 0.0,
                    r["power_samples"] or 0,
                    r["sm_samples"] or 0,
                )
            )
    by_key = {(pk, u.hour, u.model, u.profile): u for (pk, _), uses in out.items() for u in uses}
    for pk, hour, model, profile, weight in shared_seen(list(jobs), day_start(min(days)), day_start(max(days)) + DAY):
        if (use := by_key.get((pk, hour, model, profile))) is not None:
            use.shared.append(weight)
    return out
