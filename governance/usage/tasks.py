from datetime import timedelta

from celery import shared_task
from django.conf import settings

from governance.celery import transient_retry
from governance.usage import collectors, partitions, remap, services


# A deadlock, a serialization failure, a database restart or a batch row another session still holds rolls the
# whole batch back: try again (with backoff, for minutes) rather than leave it to the inbox sweep, which remains
# the last resort. Late acknowledgement and the time limit come from governance.celery.DeliveryPolicy.
@shared_task(name="usage.process_batch", **transient_retry())
def process_batch(inbox_pk: int) -> None:
    services.usage_batch_process(inbox_pk=inbox_pk)


@shared_task(name="usage.sweep_inbox")
def sweep_inbox(older_than_s: float | None = None) -> int:
    after = settings.INBOX_SWEEP_AFTER_S if older_than_s is None else older_than_s
    return services.inbox_sweep(older_than=timedelta(seconds=after))


@shared_task(name="usage.purge_inbox")
def purge_inbox() -> int:
    if settings.INBOX_RETENTION_DAYS <= 0:
        return 0
    return services.inbox_purge(older_than=timedelta(days=settings.INBOX_RETENTION_DAYS))


@shared_task(name="usage.maintain_partitions")
def maintain_partitions() -> dict[str, object]:
    report = partitions.partitions_maintain()
    return {"created": report.created, "dropped": report.dropped, "moved_rows": report.moved_rows}


@shared_task(name="usage.remap_jobs")
def remap_jobs(accounts: list[str] | None = None) -> int:
    return remap.jobs_remap(accounts=accounts)


@shared_task(name="usage.check_collectors")
def check_collectors() -> list[str]:
    return collectors.collectors_check()
