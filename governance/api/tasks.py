from celery import shared_task

from governance.api.counters import rate_counts_purge
from governance.lib.replica import user_marks_purge


@shared_task(name="api.purge_rate_counts")
def purge_rate_counts() -> int:
    return rate_counts_purge()


@shared_task(name="api.purge_write_marks")
def purge_write_marks() -> int:
    return user_marks_purge()
