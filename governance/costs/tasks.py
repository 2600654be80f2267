from celery import shared_task

from governance.celery import transient_retry
from governance.costs import failures, marks, reprice, services
from governance.lib.enqueue import enqueue

# A pass stops after this long and hands the rest of the marks to a new task (within the task time limit).
REPRICE_BUDGET_S = 60.0


@shared_task(name="costs.check_budgets")
def check_budgets() -> int:
    return len(services.budget_alerts_check())


# Idempotent: a pass claims the marks it prices, so two runs at once, or a run retried, price each day once.
@shared_task(name="costs.reprice", **transient_retry())
def reprice_marked() -> int:
    done = reprice.charges_reprice(budget_s=REPRICE_BUDGET_S)
    if done.more:
        enqueue("costs.reprice")
    return done.job_days


@shared_task(name="costs.reprice_running", **transient_retry())
def reprice_running() -> int:
    marks.running_jobs_mark()
    failures.pricing_failures_mark()  # retried: after a fix (a setting, a corrected row) it prices and clears
    done = reprice.charges_reprice(budget_s=REPRICE_BUDGET_S)
    if done.more:
        enqueue("costs.reprice")
    return done.job_days


@shared_task(name="costs.detect_anomalies")
def detect_anomalies() -> int:
    from governance.costs.anomalies import anomalies_detect

    return len(anomalies_detect())


@shared_task(name="costs.gpus_confirmed")
def gpus_confirmed(pks: list[int]) -> int:
    """GPUs an admin confirmed count as capacity and are billed from their first report: mark those days."""
    return marks.gpus_confirmed_mark(pks=pks)
