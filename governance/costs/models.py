from decimal import Decimal

from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

from governance.fleet.models import Cluster

currency_code = RegexValidator(r"^[A-Z]{3}$", "Use a three-letter ISO 4217 code, such as USD.")


class RateCard(models.Model):
    """The price of one GPU-hour of a GPU model from `valid_from` until the next card for that model."""

    gpu_model = models.CharField(max_length=200, help_text="As NVML names it, e.g. 'NVIDIA H100 80GB HBM3'.")
    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, null=True, blank=True, help_text="Empty: the rate for every cluster."
    )
    price_per_gpu_hour = models.DecimalField(
        max_digits=12, decimal_places=6, validators=[MinValueValidator(Decimal(0))]
    )
    currency = models.CharField(max_length=3, default="USD", validators=[currency_code])
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
