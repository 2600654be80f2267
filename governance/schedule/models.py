from django.db import models


class TaskRun(models.Model):
    """The last run of one periodic task (by task name), from celery beat's workers or the in-process scheduler."""

    class Outcome(models.TextChoices):
        RUNNING = "running"
        SUCCESS = "success"
        FAILURE = "failure"

    task = models.CharField(max_length=200, unique=True)
    last_started_at = models.DateTimeField(null=True, blank=True)
    last_finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.RUNNING)
    result = models.CharField(max_length=500, blank=True)
    error = models.TextField(blank=True)
    runs = models.PositiveIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["task"]

    def __str__(self) -> str:
        return f"{self.task}: {self.outcome}"
