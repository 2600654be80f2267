from celery import shared_task

from governance.usage import partitions, services


@shared_task(name="usage.process_batch", acks_late=True)
def process_batch(inbox_pk: int) -> None:
    services.usage_batch_process(inbox_pk=inbox_pk)


@shared_task(name="usage.sweep_inbox")
def sweep_inbox() -> int:
    return services.inbox_sweep()


@shared_task(name="usage.maintain_partitions")
def maintain_partitions() -> dict[str, object]:
    report = partitions.partitions_maintain()
    return {"created": report.created, "dropped": report.dropped, "moved_rows": report.moved_rows}
