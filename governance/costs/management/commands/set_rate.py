from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from governance.costs.management.commands._args import errors_of, moment_arg
from governance.costs.services import rate_card_set
from governance.lib.doors import AuditedCommand


class Command(AuditedCommand):
    help = "Set the price of one GPU-hour of a GPU model ('*': the default rate) from a date on."

    def add_arguments(self, parser):
        parser.add_argument("model", help="GPU model as NVML names it, or '*' for the default rate")
        parser.add_argument("price", help="price of one GPU-hour, e.g. 2.50")
        parser.add_argument("--currency", default="USD", help="ISO 4217 code")
        parser.add_argument("--valid-from", required=True, help="YYYY-MM-DD or ISO 8601 time (UTC)")
        parser.add_argument("--cluster", default=None, help="only for this cluster")
        parser.add_argument("--energy-price", default=None, help="price of one kWh (shown, not charged)")

    def handle(self, *args, model, price, currency, valid_from, cluster, energy_price, **options):
        try:
            card = rate_card_set(
                gpu_model=model, price=price, currency=currency, valid_from=moment_arg(valid_from),
                cluster=cluster, energy_price_per_kwh=energy_price,
            )  # fmt: skip
        except ValidationError as exc:
            raise CommandError(errors_of(exc)) from None
        self.stdout.write(f"rate set: {card}")
