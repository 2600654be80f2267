from celery import shared_task

from governance.costs import marks, reprice, services


@shared_task(name="costs.check_budgets")
def check_budgets() -> int:
    return len(services.budget_alerts_check())


# Idempotent: a pass claims the marks it prices, so two runs at once, or a run retried, price each day once.
@shared_task(name="costs.reprice", acks_late=True)
def reprice_marked() -> int:
    return reprice.charges_reprice().job_days


@shared_task(name="costs.reprice_running")
def reprice_running() -> int:
    marks.running_jobs_mark()
    return reprice.charges_reprice().job_days
