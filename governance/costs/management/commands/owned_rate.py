from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.db import transaction

from governance.costs.management.commands._args import errors_of, month_arg
from governance.costs.models import OwnedGpuCost
from governance.costs.services import owned_gpu_rate_derive, owned_gpu_rates_set
from governance.fleet.models import Cluster
from governance.lib.doors import AuditedCommand

AMOUNT_FLAGS = {"purchase": "--purchase", "residual": "--residual", "power_price": "--power-price",
                "overhead": "--overhead"}  # fmt: skip


def _amount(text: str, flag: str) -> Decimal:
    try:
        value = Decimal(text)
    except ArithmeticError:
        raise CommandError(f"{flag}: {text!r} is not a number") from None
    if not value.is_finite():
        raise CommandError(f"{flag}: {text!r} is not a number")
    return value


class Command(AuditedCommand):
    help = (
        "Price a cluster's owned GPUs from what they cost: print the hourly rate and its arithmetic; --apply writes it."
    )

    def add_arguments(self, parser):
        parser.add_argument("cluster")
        parser.add_argument("gpu_model")
        parser.add_argument("--purchase", required=True, help="purchase price per GPU")
        parser.add_argument("--residual", default="0", help="residual value per GPU at the end")
        parser.add_argument("--months", type=int, required=True, help="depreciation months")
        parser.add_argument("--from", dest="start", required=True, help="YYYY-MM: the first depreciation month")
        parser.add_argument("--power-price", default="0", help="price per kWh")
        parser.add_argument("--overhead", default="0", help="share of capex + power, e.g. 0.15")
        parser.add_argument("--currency", default="USD")
        parser.add_argument("--apply", action="store_true", help="write the rate cards of the open months")

    def handle(self, *args, cluster, gpu_model, start, apply, **o):
        cluster_obj = Cluster.objects.filter(name=cluster).first()
        if cluster_obj is None:
            raise CommandError(f"cluster: no cluster named {cluster!r}")
        amounts = {name: _amount(o[name], flag) for name, flag in AMOUNT_FLAGS.items()}
        try:
            # Checked before the row is written: the table's check constraint would refuse it with a traceback.
            if amounts["residual"] > amounts["purchase"]:
                raise ValueError("residual_value: more than the purchase price")
            with transaction.atomic():
                cost, _ = OwnedGpuCost.objects.update_or_create(
                    cluster=cluster_obj, gpu_model=gpu_model, in_service_from=month_arg(start).start.date(),
                    defaults={"purchase_price_per_gpu": amounts["purchase"],
                              "residual_value_per_gpu": amounts["residual"], "depreciation_months": o["months"],
                              "power_price_per_kwh": amounts["power_price"], "overhead_share": amounts["overhead"],
                              "currency": o["currency"]},
                )  # fmt: skip
                derivation = (owned_gpu_rates_set if apply else owned_gpu_rate_derive)(cost=cost)
        except (ValidationError, ArithmeticError, ValueError) as exc:
            raise CommandError(errors_of(exc)) from None
        for line in derivation.explain():
            self.stdout.write(line)
        if apply:
            self.stdout.write(f"wrote the rate cards of the open months of {len(derivation.months)}")
