from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models

from governance.costs.currency import validate_currency
from governance.fleet.models import Cluster
from governance.org.models import Team

# A rate card for this model name is the default rate: it prices jobs whose GPU model has no card of its own.
DEFAULT_MODEL = "*"
MONEY = {"max_digits": 24, "decimal_places": 10}
HOURS = {"max_digits": 20, "decimal_places": 6}


class RateCard(models.Model):
    """The price of one GPU-hour of a GPU model from `valid_from` until the next card for that model.

    gpu_model '*' is the default rate (of one cluster, or of every cluster) for models without a card.
    """

    gpu_model = models.CharField(
        max_length=200, help_text="As NVML names it, e.g. 'NVIDIA H100 80GB HBM3'; '*' for the default rate."
    )
    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, null=True, blank=True, help_text="Empty: the rate for every cluster."
    )
    price_per_gpu_hour = models.DecimalField(
        max_digits=12, decimal_places=6, validators=[MinValueValidator(Decimal(0))]
    )
    currency = models.CharField(max_length=3, default="USD", validators=[validate_currency])
    energy_price_per_kwh = models.DecimalField(
        max_digits=10, decimal_places=6, null=True, blank=True, validators=[MinValueValidator(Decimal(0))],
        help_text="Optional: energy is shown beside the cost (x_EnergyCost), never added to it.",
    )  # fmt: skip
    valid_from = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["gpu_model", "-valid_from"]
        constraints = [
            models.UniqueConstraint(fields=["gpu_model", "cluster", "valid_from"], name="ratecard_unique_model_from"),
            models.CheckConstraint(condition=models.Q(price_per_gpu_hour__gte=0), name="ratecard_price_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.gpu_model}: {self.price_per_gpu_hour} {self.currency}/GPU-h from {self.valid_from:%Y-%m-%d}"


class DeclaredCapacity(models.Model):
    """How many GPUs of a model a cluster holds from `valid_from` on, for clusters known only from schedulers."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="declared_capacity")
    gpu_model = models.CharField(max_length=200)
    count = models.PositiveIntegerField(help_text="Full GPUs; 0 retires the model from the cluster.")
    valid_from = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster", "gpu_model", "-valid_from"]
        verbose_name_plural = "declared capacity"
        constraints = [
            models.UniqueConstraint(fields=["cluster", "gpu_model", "valid_from"], name="capacity_unique_from"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster}: {self.count} x {self.gpu_model} from {self.valid_from:%Y-%m-%d}"


class UnallocatedPolicyTerm(models.Model):
    """How a cluster bills the capacity no job held, from `valid_from` on: its own line, or shared among teams.

    A day is billed under the term in force at its end; with no term, the cluster's capacity is its own line.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="policy_terms")
    policy = models.CharField(max_length=8, choices=Cluster.UnallocatedPolicy.choices)
    valid_from = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster", "-valid_from"]
        constraints = [models.UniqueConstraint(fields=["cluster", "valid_from"], name="policyterm_unique_from")]

    def __str__(self) -> str:
        return f"{self.cluster}: {self.policy} from {self.valid_from:%Y-%m-%d}"


class BillingModeTerm(models.Model):
    """Whether a cluster's charges are billed to the teams (chargeback) or only shown to them (showback), from
    `valid_from` on. A day is under the term in force at its end; with no term, a cluster bills."""

    class Mode(models.TextChoices):
        BILLED = "billed", "Billed (chargeback)"
        SHOWBACK = "showback", "Shown, not billed (showback)"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="billing_terms")
    mode = models.CharField(max_length=8, choices=Mode.choices)
    valid_from = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster", "-valid_from"]
        constraints = [models.UniqueConstraint(fields=["cluster", "valid_from"], name="billingmode_unique_from")]

    def __str__(self) -> str:
        return f"{self.cluster}: {self.mode} from {self.valid_from:%Y-%m-%d}"


class GridIntensity(models.Model):
    """The carbon intensity of the grid a cluster draws from (kg CO2e per kWh), from `valid_from` on; a day is
    under the value in force at its end. `source` names where the number came from (a dataset and its year)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="grid_intensity")
    location = models.CharField(max_length=64, blank=True, help_text="ISO 3166 alpha-3 country, or a grid region.")
    kg_co2e_per_kwh = models.DecimalField(max_digits=8, decimal_places=6, validators=[MinValueValidator(Decimal(0))])
    source = models.CharField(max_length=200, blank=True)
    valid_from = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster", "-valid_from"]
        verbose_name_plural = "grid intensity"
        constraints = [
            models.UniqueConstraint(fields=["cluster", "valid_from"], name="gridintensity_unique_from"),
            models.CheckConstraint(condition=models.Q(kg_co2e_per_kwh__gte=0), name="gridintensity_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster}: {self.kg_co2e_per_kwh} kg CO2e/kWh from {self.valid_from:%Y-%m-%d}"


class MonthClose(models.Model):
    """A month finance has closed: its statement lines are frozen and never change again.

    `terms` keeps the rate cards, declared capacity and policies as they stood at the close: late usage for the
    month is priced under them, whatever changes afterwards.
    """

    month = models.DateField(unique=True, help_text="The first day of the month.")
    closed_at = models.DateTimeField(auto_now_add=True)
    closed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True)
    terms = models.JSONField(default=dict, blank=True, help_text="The terms the month was priced under.")

    class Meta:
        ordering = ["-month"]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} closed"


class StatementLine(models.Model):
    """One frozen line of a closed month: a job's day, a cluster's unallocated capacity, a share, or an adjustment.

    Names are copied, not joined, so that renaming a team or project later leaves the bill as it was.
    """

    class Kind(models.TextChoices):
        USAGE = "usage", "Usage"
        UNALLOCATED = "unallocated", "Unallocated capacity"
        SHARED = "shared", "Share of unallocated capacity"
        ADJUSTMENT = "adjustment", "Adjustment"

    close = models.ForeignKey(MonthClose, on_delete=models.PROTECT, related_name="lines")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    corrects = models.DateField(null=True, blank=True, help_text="Adjustments: the closed month they correct.")
    cluster_name = models.CharField(max_length=200)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, null=True, blank=True)
    team_name = models.CharField(max_length=200, blank=True)
    project_name = models.CharField(max_length=200, blank=True)
    job_ref = models.CharField(max_length=200, blank=True, help_text="The scheduler's job id.")
    user_name = models.CharField(max_length=200, blank=True)
    gpu_model = models.CharField(max_length=200, blank=True)
    mig_profile = models.CharField(max_length=32, blank=True)
    gpu_hours = models.DecimalField(**HOURS)
    used_gpu_hours = models.DecimalField(**HOURS)
    idle_gpu_hours = models.DecimalField(**HOURS)
    cost = models.DecimalField(**MONEY)
    idle_cost = models.DecimalField(**MONEY)
    energy_kwh = models.DecimalField(**HOURS)
    energy_cost = models.DecimalField(**MONEY)
    carbon_kg = models.DecimalField(
        **HOURS, default=Decimal(0), db_default=Decimal(0), help_text="kg CO2e: energy x grid intensity."
    )
    billed = models.BooleanField(
        default=True, db_default=True, help_text="False: showback, the cost is shown and not billed."
    )
    currency = models.CharField(max_length=3)
    at_default_rate = models.BooleanField(default=False)
    # Ids as they were at the close (no constraint: the line outlives what it names); corrections are keyed by them.
    job = models.ForeignKey(
        "usage.Job", on_delete=models.DO_NOTHING, db_constraint=False, null=True, blank=True, related_name="+"
    )
    project = models.ForeignKey(
        "org.Project", on_delete=models.DO_NOTHING, db_constraint=False, null=True, blank=True, related_name="+"
    )
    corrected_kind = models.CharField(max_length=12, blank=True, help_text="Adjustments: the kind of line corrected.")
    reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["close", "period_start", "id"]
        indexes = [models.Index(fields=["close", "team"], name="statementline_close_team_idx")]

    def __str__(self) -> str:
        return f"{self.kind} {self.team_name or self.cluster_name} {self.period_start:%Y-%m-%d}: {self.cost}"


class Budget(models.Model):
    """What a team may spend in one month, and the percentages at which its lead is told."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budgets")
    month = models.DateField(help_text="The first day of the month.")
    amount = models.DecimalField(max_digits=16, decimal_places=2, validators=[MinValueValidator(Decimal("0.01"))])
    currency = models.CharField(max_length=3, default="USD", validators=[validate_currency])
    thresholds = models.JSONField(default=list, blank=True, help_text="Percentages; empty: 50, 80, 100.")
    webhook_url = models.URLField(blank=True, help_text="Empty: the GOVERNANCE_BUDGET_WEBHOOK_URL setting.")

    class Meta:
        ordering = ["-month", "team"]
        constraints = [models.UniqueConstraint(fields=["team", "month"], name="budget_unique_team_month")]

    def __str__(self) -> str:
        return f"{self.team} {self.month:%Y-%m}: {self.amount} {self.currency}"


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


class Charge(models.Model):
    """One row of the charge ledger: what is billed for a job's day on one GPU model or MIG profile, a cluster's
    unallocated capacity of a day and model (or one team's share of it), or a correction of a closed month.

    The worker keeps the rows current (governance/costs/reprice.py); every read of money is an aggregate over
    them (open months) or over the frozen StatementLine copies (closed months). Closed months keep their rows
    here too, re-priced under their frozen terms when late usage arrives: the difference from what was frozen
    becomes adjustment rows in the next open month. Names are copied so a statement reads without joins.
    """

    class Kind(models.TextChoices):
        USAGE = "usage", "Usage"
        UNALLOCATED = "unallocated", "Unallocated capacity"
        SHARED = "shared", "Share of unallocated capacity"
        ADJUSTMENT = "adjustment", "Adjustment"

    kind = models.CharField(max_length=12, choices=Kind.choices)
    month = models.DateField(help_text="The billing month (its first day) the row belongs to.")
    day = models.DateField(help_text="The day charged; adjustments: the first day of the month they land in.")
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="+")
    cluster_name = models.CharField(max_length=200)
    job = models.ForeignKey(
        "usage.Job", on_delete=models.DO_NOTHING, db_constraint=False, null=True, blank=True, related_name="+"
    )
    job_ref = models.CharField(max_length=200, blank=True)
    user_name = models.CharField(max_length=200, blank=True)
    team = models.ForeignKey(
        Team, on_delete=models.DO_NOTHING, db_constraint=False, null=True, blank=True, related_name="+"
    )
    team_name = models.CharField(max_length=200, blank=True)
    project = models.ForeignKey(
        "org.Project", on_delete=models.DO_NOTHING, db_constraint=False, null=True, blank=True, related_name="+"
    )
    project_name = models.CharField(max_length=200, blank=True)
    gpu_model = models.CharField(max_length=200, blank=True)
    mig_profile = models.CharField(max_length=32, blank=True)
    gpu_hours = models.DecimalField(**HOURS)
    used_gpu_hours = models.DecimalField(**HOURS)
    idle_gpu_hours = models.DecimalField(**HOURS)
    cost = models.DecimalField(**MONEY)
    idle_cost = models.DecimalField(**MONEY)
    energy_kwh = models.DecimalField(**HOURS)
    energy_cost = models.DecimalField(**MONEY)
    carbon_kg = models.DecimalField(
        **HOURS, default=Decimal(0), db_default=Decimal(0), help_text="kg CO2e: energy x grid intensity."
    )
    billed = models.BooleanField(
        default=True, db_default=True, help_text="False: showback, the cost is shown and not billed."
    )
    currency = models.CharField(max_length=3)
    at_default_rate = models.BooleanField(default=False)
    corrects = models.DateField(null=True, blank=True, help_text="Adjustments: the closed month they correct.")
    corrected_kind = models.CharField(max_length=12, blank=True, help_text="Adjustments: the kind of line corrected.")
    reason = models.CharField(max_length=200, blank=True)
    priced_at = models.DateTimeField()

    class Meta:
        ordering = ["month", "kind", "period_start", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["job", "day", "gpu_model", "mig_profile"], condition=models.Q(kind="usage"),
                name="charge_one_usage_row_per_job_day_sku",
            ),
            models.UniqueConstraint(
                fields=["cluster", "day", "gpu_model"], condition=models.Q(kind="unallocated"),
                name="charge_one_unallocated_row_per_cluster_day_model",
            ),
            models.CheckConstraint(
                condition=~models.Q(kind="adjustment") | models.Q(corrects__isnull=False),
                name="charge_adjustment_names_its_month",
            ),
        ]  # fmt: skip
        indexes = [
            models.Index(fields=["month", "team"], name="charge_month_team_idx"),
            # The statement order the CSV streams in, without a sort.
            models.Index(fields=["month", "-kind", "period_start", "id"], name="charge_statement_order_idx"),
            models.Index(fields=["cluster", "day"], name="charge_cluster_day_idx"),
            models.Index(fields=["job", "day"], name="charge_job_day_idx"),
            models.Index(fields=["corrects"], condition=models.Q(kind="adjustment"), name="charge_corrects_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.team_name or self.cluster_name} {self.day}: {self.cost}"


class CapacityDay(models.Model):
    """What a cluster's GPUs of one model could be billed for on one day (declared, else seen by collectors),
    up to `priced_until`: team charges and unallocated lines of the day add up to it. Frozen once the month closes.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    gpu_model = models.CharField(max_length=200)
    gpu_hours = models.DecimalField(**HOURS)
    cost = models.DecimalField(**MONEY)
    priced_until = models.DateTimeField()

    class Meta:
        ordering = ["cluster", "day", "gpu_model"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "day", "gpu_model"], name="capacityday_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster} {self.day} {self.gpu_model}: {self.gpu_hours} GPU-h"


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


class OwnedGpuCost(models.Model):
    """What one owned GPU of a model on a cluster costs: purchase price, residual value, depreciation months from
    `in_service_from`, the power price and the overhead share. governance/costs/owned.py derives the hourly rate;
    the service writes it as the cluster's rate cards, one per depreciation month."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="owned_costs")
    gpu_model = models.CharField(max_length=200)
    purchase_price_per_gpu = models.DecimalField(max_digits=14, decimal_places=2, validators=[MinValueValidator(0)])
    residual_value_per_gpu = models.DecimalField(max_digits=14, decimal_places=2, default=Decimal(0),
                                                 validators=[MinValueValidator(0)])  # fmt: skip
    depreciation_months = models.PositiveSmallIntegerField(validators=[MinValueValidator(1)])
    power_price_per_kwh = models.DecimalField(max_digits=10, decimal_places=6, default=Decimal(0))
    overhead_share = models.DecimalField(
        max_digits=6, decimal_places=4, default=Decimal(0),
        help_text="Facilities, staff, network: a share of capex + power (0.15 = 15%).",
    )  # fmt: skip
    currency = models.CharField(max_length=3, default="USD", validators=[validate_currency])
    in_service_from = models.DateField(help_text="The first day of the first depreciation month.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster", "gpu_model", "-in_service_from"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "gpu_model", "in_service_from"], name="ownedgpucost_unique"),
            models.CheckConstraint(condition=models.Q(residual_value_per_gpu__lte=models.F("purchase_price_per_gpu")),
                                   name="ownedgpucost_residual_within_price"),
        ]  # fmt: skip

    def __str__(self) -> str:
        return f"{self.cluster} {self.gpu_model}: {self.purchase_price_per_gpu} {self.currency} per GPU"
