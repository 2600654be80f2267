from __future__ import annotations

from django.db import models
from django.utils import timezone


class PricingFailure(models.Model):
    """A job-day the pricing pass could not price (its error, when it first and last failed, how often). The rest
    of the pass goes on without it; the periodic pass retries it, and a success deletes the row."""

    job = models.ForeignKey("usage.Job", on_delete=models.CASCADE, related_name="+")
    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    error = models.TextField()
    first_seen_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)
    attempts = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["-last_seen_at", "job_id", "day"]
        constraints = [models.UniqueConstraint(fields=["job", "day"], name="pricingfailure_one_per_job_day")]

    def __str__(self) -> str:
        return f"job {self.job_id} on {self.day}: {self.error[:80]}"
