from celery import shared_task

from governance.costs import services


@shared_task(name="costs.check_budgets")
def check_budgets() -> int:
    return len(services.budget_alerts_check())
