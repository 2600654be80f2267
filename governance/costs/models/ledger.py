"""The charge ledger, its frozen copies in closed months and each day's capacity."""

from decimal import Decimal

from django.conf import settings
from django.db import models

from governance.costs.models.common import HOURS, MONEY, Precision
from governance.fleet.models import Cluster
from governance.org.models import Team


def _amount(precision: Precision, help_text: str) -> models.DecimalField:
    return models.DecimalField(**precision, default=Decimal(0), db_default=Decimal(0), help_text=help_text)


class MonthClose(models.Model):
    """A month finance has closed: its statement lines are frozen and never change again.

    `terms` keeps the rate cards, declared capacity and policies as they stood at the close: late usage for the
    month is priced under them, whatever changes afterwards. The close issues the month's invoice (FOCUS InvoiceId
    on every row of the frozen statement, corrections that landed in it included).
    """

    month = models.DateField(unique=True, help_text="The first day of the month.")
    closed_at = models.DateTimeField(auto_now_add=True)
    closed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True)
    terms = models.JSONField(default=dict, blank=True, help_text="The terms the month was priced under.")
    invoice_id = models.CharField(max_length=80, help_text="The invoice the close issued: GG-<month>-<account>.")
    unpriced_accepted = models.JSONField(
        default=list, blank=True,
        help_text="Usage of GPU models with no rate card finance accepted at the close: cluster, model, GPU-hours.",
    )  # fmt: skip

    class Meta:
        ordering = ["-month"]
        constraints = [models.UniqueConstraint(fields=["invoice_id"], name="monthclose_unique_invoice")]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} closed"


class LineKind(models.TextChoices):
    USAGE = "usage", "Usage"
    UNALLOCATED = "unallocated", "Unallocated capacity"
    SHARED = "shared", "Share of unallocated capacity"
    UNUSED = "unused", "Unused commitment"
    PURCHASE = "purchase", "Commitment purchase"
    ADJUSTMENT = "adjustment", "Adjustment"


class LineAmounts(models.Model):
    """What a ledger row and its frozen statement line both carry: hours, money (FOCUS's costs), energy, carbon."""

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
    # FOCUS cost columns beside `cost` (EffectiveCost, what the team is charged); all equal it without a commitment.
    list_cost = _amount(MONEY, "FOCUS ListCost: at the rate card.")
    contracted_cost = _amount(MONEY, "FOCUS ContractedCost: the rate card less the negotiated discount.")
    billed_cost = _amount(MONEY, "FOCUS BilledCost under chargeback: 0 where a commitment covers; fee on purchases.")
    commitment_gpu_hours = _amount(HOURS, "GPU-hours drawn from (usage), left unused of or bought under a commitment.")
    commitment = models.ForeignKey(
        "costs.Commitment", on_delete=models.DO_NOTHING, db_constraint=False, null=True, blank=True, related_name="+"
    )
    currency = models.CharField(max_length=3)
    at_default_rate = models.BooleanField(default=False)
    gpu_share = models.DecimalField(
        max_digits=7, decimal_places=6, null=True, blank=True,
        help_text="Usage of a job on a share of one GPU (time-slicing, MPS, a fractional request): the share it"
        " declared (0.47; gpu_hours are hours x share). Null on whole GPUs and on every other kind of line.",
    )  # fmt: skip

    class Meta:
        abstract = True


class StatementLine(LineAmounts):
    """One frozen line of a closed month: a job's day, a cluster's unallocated capacity, a share, or an adjustment.

    Names are copied, not joined, so that renaming a team or project later leaves the bill as it was.
    """

    Kind = LineKind

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


class Charge(LineAmounts):
    """One row of the charge ledger: what is billed for a job's day on one GPU model or MIG profile, a cluster's
    unallocated capacity of a day and model (or one team's share of it), or a correction of a closed month.

    The worker keeps the rows current (governance/costs/reprice.py); every read of money is an aggregate over
    them (open months) or over the frozen StatementLine copies (closed months). Closed months keep their rows
    here too, re-priced under their frozen terms when late usage arrives: the difference from what was frozen
    becomes adjustment rows in the next open month. Names are copied so a statement reads without joins.
    """

    Kind = LineKind

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
            # The few usage rows no rate card priced, which finance's month and a team's month list.
            models.Index(
                fields=["month", "team"], condition=models.Q(kind="usage", at_default_rate=True),
                name="charge_at_default_rate_idx",
            ),
            # A month's rows other than jobs' usage (shares, corrections, capacity), which `JobMonth` does not sum.
            models.Index(
                fields=["month", "team"], condition=~models.Q(kind="usage", job__isnull=False),
                name="charge_not_job_usage_idx",
            ),
        ]  # fmt: skip

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
