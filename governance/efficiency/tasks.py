from celery import shared_task

from governance.efficiency import notifications, services


@shared_task(name="efficiency.evaluate_running")
def evaluate_running() -> int:
    return services.findings_evaluate_running().opened


# The pricing pass names this task (governance/lib/enqueue.py) for the jobs it priced: their waste is re-counted
# from the new ledger rows.
@shared_task(name="efficiency.evaluate_jobs")
def evaluate_jobs(job_ids: list[int]) -> int:
    return services.findings_evaluate_priced(job_ids=job_ids).refreshed


@shared_task(name="efficiency.evaluate_ended")
def evaluate_ended() -> int:
    return services.findings_evaluate_ended().opened


@shared_task(name="efficiency.refresh_savings")
def refresh_savings() -> int:
    return services.findings_savings_refresh().jobs


@shared_task(name="efficiency.weekly_digest")
def weekly_digest() -> int:
    return notifications.digests_send()


@shared_task(name="efficiency.cluster_alerts")
def cluster_alerts() -> int:
    return len(notifications.cluster_alerts_check())
