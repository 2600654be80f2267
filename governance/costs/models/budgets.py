"""Budgets, the requests for one, the alerts they sent, and spend anomalies."""

from decimal import Decimal

from django.core.validators import MinValueValidator
from django.db import models

from governance.costs.currency import validate_currency
from governance.notify.targets import webhook_url_validate
from governance.org.models import Team, User


class Budget(models.Model):
    """What a team may spend in one month, and the percentages at which its lead is told."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budgets")
    month = models.DateField(help_text="The first day of the month.")
    amount = models.DecimalField(max_digits=16, decimal_places=2, validators=[MinValueValidator(Decimal("0.01"))])
    currency = models.CharField(max_length=3, default="USD", validators=[validate_currency])
    thresholds = models.JSONField(default=list, blank=True, help_text="Percentages; empty: 50, 80, 100.")
    webhook_url = models.URLField(
        blank=True, validators=[webhook_url_validate],
        help_text="https on a public address (or WEBHOOK_ALLOWED_HOSTS). Empty: the GOVERNANCE_BUDGET_WEBHOOK_URL "
        "setting.",
    )  # fmt: skip

    class Meta:
        ordering = ["-month", "team"]
        constraints = [models.UniqueConstraint(fields=["team", "month"], name="budget_unique_team_month")]

    def __str__(self) -> str:
        return f"{self.team} {self.month:%Y-%m}: {self.amount} {self.currency}"


class BudgetRequest(models.Model):
    """A team's request, made from its page, that finance or an admin set its budget for one month: once per team
    and month; finance and admins are told when it is made."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budget_requests")
    month = models.DateField(help_text="The first day of the month.")
    requested_by = models.ForeignKey(User, on_delete=models.SET_NULL, null=True, related_name="+")
    requested_by_name = models.CharField(max_length=150, help_text="Kept if the user is deleted.")
    requested_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-requested_at"]
        constraints = [models.UniqueConstraint(fields=["team", "month"], name="budgetrequest_once_per_team_month")]

    def __str__(self) -> str:
        return f"{self.team} {self.month:%Y-%m}: asked by {self.requested_by_name}"


class BudgetAlert(models.Model):
    """A threshold of a budget that was crossed (actual) or that the month-end forecast will cross (forecast),
    and was announced: at most one per kind, threshold and month."""

    class Kind(models.TextChoices):
        ACTUAL = "actual", "Spent"
        FORECAST = "forecast", "Forecast to exceed"

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.ACTUAL)
    threshold = models.PositiveSmallIntegerField()
    spent = models.DecimalField(max_digits=16, decimal_places=2, help_text="Forecast alerts: the forecast.")
    expected_on = models.DateField(null=True, blank=True, help_text="Forecast alerts: the day it is expected.")
    sent_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-sent_at"]
        constraints = [
            models.UniqueConstraint(fields=["budget", "kind", "threshold"], name="budgetalert_once_per_kind_threshold")
        ]

    def __str__(self) -> str:
        return f"{self.budget}: {self.threshold}% crossed"


class Anomaly(models.Model):
    """A day on which a team's (or one of its projects') spend, idle share or GPU-hours jumped far from its recent
    normal: the day's value, the baseline (median of the window before it) and the robust score (in MADs)."""

    class Metric(models.TextChoices):
        SPEND = "spend", "Spend"
        IDLE_SHARE = "idle_share", "Idle share of the cost"
        GPU_HOURS = "gpu_hours", "GPU-hours"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="anomalies")
    project = models.ForeignKey("org.Project", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    day = models.DateField()
    metric = models.CharField(max_length=12, choices=Metric.choices)
    value = models.DecimalField(max_digits=24, decimal_places=6)
    baseline = models.DecimalField(max_digits=24, decimal_places=6)
    score = models.FloatField(help_text="(value - baseline) / (1.4826 x MAD) over the window before the day.")
    window_days = models.PositiveSmallIntegerField()
    detected_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "anomaly"
        verbose_name_plural = "anomalies"
        ordering = ["-day", "team", "metric"]
        constraints = [
            models.UniqueConstraint(fields=["team", "day", "metric"], condition=models.Q(project__isnull=True),
                                    name="anomaly_once_per_team_day_metric"),
            models.UniqueConstraint(fields=["team", "project", "day", "metric"],
                                    condition=models.Q(project__isnull=False),
                                    name="anomaly_once_per_project_day_metric"),
        ]  # fmt: skip
        indexes = [models.Index(fields=["team", "-day"], name="anomaly_team_day_idx")]

    def __str__(self) -> str:
        return f"{self.team} {self.day} {self.metric}: {self.value} vs {self.baseline} ({self.score:+.1f})"
