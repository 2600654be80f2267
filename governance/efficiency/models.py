from django.conf import settings
from django.db import models
from django.db.models import Q

from governance.fleet.models import Cluster
from governance.usage.models import Job

LIVE_STATES = ("open", "acknowledged")


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
    waste = models.DecimalField(
        max_digits=14,
        decimal_places=2,
        default=0,
        help_text="The cost of the GPU-hours this finding says were wasted, priced from the job's ledger rows; "
        "each wasted GPU-hour counts under one finding only, so wastes add up to at most the bill.",
    )
    wasted_gpu_hours = models.DecimalField(max_digits=14, decimal_places=4, default=0)
    savings = models.DecimalField(
        max_digits=14,
        decimal_places=2,
        default=0,
        help_text="What following the advice would have saved over the trailing 30 days (from savings_from to the "
        "day of the evaluation), priced from the job's ledger rows and partitioned across its findings like waste, so "
        "savings add up to at most what the job, and the team, spent in the window.",
    )
    savings_from = models.DateField(
        null=True, blank=True, help_text="First day of the window the savings were measured over; null: never measured."
    )
    currency = models.CharField(max_length=3, default="USD")
    advice = models.TextField()
    dismissed_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    state_changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    notified_at = models.DateTimeField(null=True, blank=True, help_text="Before the outbox: when the webhook took it.")

    class Meta:
        ordering = ["-waste", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["job", "rule"],
                condition=Q(state__in=["open", "acknowledged"]),
                name="finding_one_live_per_job_rule",
            ),
            models.CheckConstraint(
                condition=~Q(state="dismissed") | ~Q(dismissed_reason=""), name="finding_dismissed_has_reason"
            ),
        ]
        indexes = [
            models.Index(fields=["state", "-waste"], name="finding_state_waste_idx"),
            # A page's probe for one job's findings in a state: one index, however stale the table's statistics
            # (with only the job's index PostgreSQL may intersect it with the whole state index for every job).
            models.Index(fields=["job", "state"], name="finding_job_state_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.rule} on {self.job}"

    @property
    def resolved_by_rules(self) -> bool:
        """Resolved by a re-evaluation that no longer fired (no person): it reopens when the rule fires again."""
        return self.state == self.State.RESOLVED and self.state_changed_by_id is None


class JobEvaluation(models.Model):
    """When the rules last looked at one job; `final_at` is set once they looked after its last samples."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="evaluation")
    evaluated_at = models.DateTimeField()
    final_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.job} evaluated {self.evaluated_at:%Y-%m-%d %H:%M}"


class ClusterAlert(models.Model):
    """One low-utilisation alert sent for a cluster: the day's effective utilisation and the line it fell under."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    window_end = models.DateTimeField()
    utilisation_percent = models.FloatField()
    threshold_percent = models.FloatField()
    sent_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-sent_at"]

    def __str__(self) -> str:
        return f"{self.cluster}: {self.utilisation_percent:.1f}% < {self.threshold_percent:.0f}%"


class FindingEvent(models.Model):
    """One change of a finding's state: from what, to what, by whom (none: the rules' re-evaluation) and why; or one
    step of a remediation of its job (a warning, an action, a recovery), the state unchanged."""

    class Verb(models.TextChoices):
        OPENED = "opened"
        ACKNOWLEDGED = "acknowledged"
        RESOLVED = "resolved"
        REOPENED = "reopened"
        DISMISSED = "dismissed"
        REMEDIATION = "remediation", "Remediation step"

    finding = models.ForeignKey(Finding, on_delete=models.CASCADE, related_name="events")
    verb = models.CharField(max_length=16, choices=Verb.choices)
    from_state = models.CharField(max_length=16, blank=True)
    to_state = models.CharField(max_length=16, choices=Finding.State.choices)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    reason = models.TextField(blank=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ["finding", "at", "id"]

    def __str__(self) -> str:
        return f"{self.finding} {self.verb} by {self.by or 'the rules'}"
