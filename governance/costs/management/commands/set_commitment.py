from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from governance.costs.management.commands._args import errors_of, moment_arg
from governance.costs.services import commitment_set
from governance.lib.doors import AuditedCommand
from governance.org.models import Team


class Command(AuditedCommand):
    help = "Reserve GPUs of a model on a cluster for a team at a committed price per GPU-hour, from START to END."

    def add_arguments(self, parser):
        parser.add_argument("team", help="The team's slug.")
        parser.add_argument("cluster")
        parser.add_argument("gpu_model")
        parser.add_argument("gpus", type=int)
        parser.add_argument("price", help="Committed price per GPU-hour.")
        parser.add_argument("--start", required=True, help="YYYY-MM-DD or ISO 8601 time (UTC)")
        parser.add_argument("--end", required=True, help="YYYY-MM-DD or ISO 8601 time (UTC), exclusive")
        parser.add_argument("--discount", default="0", help="Negotiated %% off the rate card beyond the commitment.")
        parser.add_argument("--currency", default="USD")
        parser.add_argument("--name", default="")

    def handle(self, *args, team, cluster, gpu_model, gpus, price, start, end, discount, currency, name, **options):
        found = Team.objects.filter(slug=team).first()
        if found is None:
            raise CommandError(f"team: no team {team!r}")
        try:
            commitment = commitment_set(
                team=found, cluster=cluster, gpu_model=gpu_model, gpus=gpus, price=price, currency=currency,
                start=moment_arg(start, "--start"), end=moment_arg(end, "--end"), contracted_discount_percent=discount,
                name=name,
            )  # fmt: skip
        except ValidationError as exc:
            raise CommandError(errors_of(exc)) from None
        self.stdout.write(f"commitment set: {commitment}")
