import os

from celery import Celery
from celery.signals import task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")

app = Celery("governance")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def close_old_connections(task=None, **kwargs) -> None:
    """Around each task, what Django does around each request: drop a connection that is too old
    (CONN_MAX_AGE), broken, or left in a failed state, and keep a healthy one for the next task.

    A task run eagerly belongs to its caller's request or transaction, which it must not close.
    """
    if task is None or task.request.is_eager:
        return
    from django.db import close_old_connections as close

    close()
