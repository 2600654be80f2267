from celery import shared_task

from governance.remediation import services


@shared_task(name="remediation.check")
def check() -> int:
    return services.remediation_check().steps
