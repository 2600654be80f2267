from celery import shared_task

from governance.notify import services


@shared_task(name="notify.deliver_due")
def deliver_due() -> int:
    return services.outbox_deliver_due()
