from celery import shared_task

from governance.usage import services


@shared_task(name="usage.process_batch", acks_late=True)
def process_batch(inbox_pk: int) -> None:
    services.usage_batch_process(inbox_pk=inbox_pk)


@shared_task(name="usage.sweep_inbox")
def sweep_inbox() -> int:
    return services.inbox_sweep()
