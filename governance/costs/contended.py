"""Pricing a contended cluster-day (claims over capacity, a GPU two jobs share, an unconfirmed GPU, or an earlier
over-claim): every job of the day is priced together, so that what they are billed fits the GPUs that exist; what
is not billed is recorded as an over-claim. governance/costs/contention.py says which days are contended.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date

from governance.costs.allocation import Holder, day_allocation
from governance.costs.contention import day_seen
from governance.costs.failures import Failed, job_day_failed
from governance.costs.ledger import HourUse, JobFacts, allocated_rows, month_of
from governance.costs.overclaims import allocated_hours_replace, overclaims_record
from governance.costs.terms import TermsByMonth


def contended_rows(
    contended: dict, job_days: dict[int, set[date]], jobs: dict[int, JobFacts],
    hours: dict[tuple[int, date], list[HourUse]], terms: TermsByMonth, failed: Failed,
) -> list[dict]:  # fmt: skip
    """The usage rows of the contended cluster-days, all their jobs priced together; their over-claims recorded. A
    job-day that fails is noted in `failed` and the rest is priced; if the day's allocation itself fails, every job
    of that day is."""
    rows: list[dict] = []
    held = {}
    for (cid, day), inputs in sorted(contended.items()):
        mine = [j for pk, j in jobs.items() if j.cluster_id == cid and day in job_days.get(pk, ())]
        holders = [Holder(j.pk, j.gpus if j.declared else None, j.model, j.profile, j.start, j.end,
                          None if j.runs is None else tuple(j.runs)) for j in mine]  # fmt: skip
        try:
            held[(cid, day)] = day_allocation(inputs.first, inputs.last, holders, day_seen(cid, inputs),
                                              inputs.capacity, inputs.free, inputs.blind)  # fmt: skip
        except Exception as exc:
            for job in mine:
                job_day_failed(failed, job.pk, cid, day, exc)
            continue
        by_job: dict[int, dict] = defaultdict(dict)
        for (pk, model, profile), h in held[(cid, day)].items():
            by_job[pk][(model, profile)] = h
        month_terms = terms.of(month_of(day))
        for job in mine:
            try:
                rows.extend(allocated_rows(job, day, by_job.get(job.pk, {}), hours.get((job.pk, day), []),
                                           month_terms))  # fmt: skip
            except Exception as exc:
                job_day_failed(failed, job.pk, cid, day, exc)
    overclaims_record(days=set(contended), held=held, jobs=jobs)
    allocated_hours_replace(job_days=job_days, held=held)
    return rows
