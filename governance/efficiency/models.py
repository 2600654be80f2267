from django.db import models
from django.db.models import Q

from governance.usage.models import Job


class Finding(models.Model):
    """One rule firing on one job: why, what it wastes, and what to change."""

    class Severity(models.TextChoices):
        INFO = "info"
        WARNING = "warning"
        CRITICAL = "critical"

    class State(models.TextChoices):
        OPEN = "open"
        ACKNOWLEDGED = "acknowledged"
        RESOLVED = "resolved"
        DISMISSED = "dismissed"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="findings")
    rule = models.CharField(max_length=64)
    severity = models.CharField(max_length=16, choices=Severity.choices, default=Severity.WARNING)
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    evidence = models.JSONField(default=dict)
    monthly_waste = models.DecimalField(max_digits=14, decimal_places=2, default=0)
    currency = models.CharField(max_length=3, default="USD")
    advice = models.TextField()
    dismissed_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-monthly_waste", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["job", "rule"],
                condition=Q(state__in=["open", "acknowledged"]),
                name="finding_one_live_per_job_rule",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.rule} on {self.job}"
