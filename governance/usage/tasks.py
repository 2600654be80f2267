from celery import shared_task
from django.db import OperationalError

from governance.usage import partitions, services


# A deadlock, a serialization failure or a dropped connection rolls the whole batch back: try again soon
# (with backoff) rather than leave it to the inbox sweep, which remains the last resort.
@shared_task(
    name="usage.process_batch",
    acks_late=True,
    autoretry_for=(OperationalError,),
    retry_backoff=1,
    retry_backoff_max=60,
    max_retries=5,
)
def process_batch(inbox_pk: int) -> None:
    services.usage_batch_process(inbox_pk=inbox_pk)


@shared_task(name="usage.sweep_inbox")
def sweep_inbox() -> int:
    return services.inbox_sweep()


@shared_task(name="usage.maintain_partitions")
def maintain_partitions() -> dict[str, object]:
    report = partitions.partitions_maintain()
    return {"created": report.created, "dropped": report.dropped, "moved_rows": report.moved_rows}


@shared_task(name="usage.remap_jobs")
def remap_jobs(accounts: list[str] | None = None) -> int:
    return services.jobs_remap(accounts=accounts)
