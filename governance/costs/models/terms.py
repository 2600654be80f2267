"""Effective-dated terms: rate cards, declared capacity, unallocated policy, billing mode, grid intensity, owned
GPU costs and commitments."""

from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from governance.costs.currency import validate_currency
from governance.fleet.models import Cluster
from governance.org.models import Team


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
        verbose_name = "owned GPU cost"
        verbose_name_plural = "owned GPU costs"
        ordering = ["cluster", "gpu_model", "-in_service_from"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "gpu_model", "in_service_from"], name="ownedgpucost_unique"),
            models.CheckConstraint(condition=models.Q(residual_value_per_gpu__lte=models.F("purchase_price_per_gpu")),
                                   name="ownedgpucost_residual_within_price"),
        ]  # fmt: skip

    def __str__(self) -> str:
        return f"{self.cluster} {self.gpu_model}: {self.purchase_price_per_gpu} {self.currency} per GPU"


class Commitment(models.Model):
    """A team's reserved capacity: `gpus` whole GPUs of a model on a cluster at a committed price per GPU-hour, from
    `start` to `end`. Each hour the team's GPUs of that model on that cluster up to `gpus` are covered at the
    committed price; the rest is overage at the rate card less `contracted_discount_percent`. What the team did not
    use of it is billed to the team as its own ledger row (FOCUS CommitmentDiscountStatus Unused)."""

    name = models.CharField(max_length=200, blank=True, help_text="As finance names it, e.g. 'A100 reservation 2026'.")
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="commitments")
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="commitments")
    gpu_model = models.CharField(max_length=200, help_text="As NVML names it; whole GPUs of it are covered.")
    gpus = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    price_per_gpu_hour = models.DecimalField(max_digits=12, decimal_places=6, validators=[MinValueValidator(0)])
    contracted_discount_percent = models.DecimalField(
        max_digits=5, decimal_places=2, default=Decimal(0), validators=[MinValueValidator(0), MaxValueValidator(100)],
        help_text="Negotiated discount off the rate card on the team's usage beyond the commitment.",
    )  # fmt: skip
    currency = models.CharField(max_length=3, default="USD", validators=[validate_currency])
    start = models.DateTimeField()
    end = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team", "cluster", "gpu_model", "-start"]
        constraints = [
            models.CheckConstraint(condition=models.Q(end__gt=models.F("start")), name="commitment_ends_after_start"),
            models.CheckConstraint(condition=models.Q(gpus__gte=1), name="commitment_at_least_one_gpu"),
            models.CheckConstraint(condition=models.Q(price_per_gpu_hour__gte=0), name="commitment_price_not_negative"),
            models.CheckConstraint(
                condition=models.Q(contracted_discount_percent__gte=0, contracted_discount_percent__lte=100),
                name="commitment_discount_a_percentage",
            ),
        ]

    def __str__(self) -> str:
        return (f"{self.team}: {self.gpus} x {self.gpu_model} on {self.cluster} at {self.price_per_gpu_hour}"
                f" {self.currency}/GPU-h, {self.start:%Y-%m-%d} to {self.end:%Y-%m-%d}")  # fmt: skip
