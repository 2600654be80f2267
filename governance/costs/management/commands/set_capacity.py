from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from governance.costs.management.commands._args import errors_of, moment_arg
from governance.costs.services import capacity_set
from governance.lib.doors import AuditedCommand


class Command(AuditedCommand):
    help = "Declare how many GPUs of a model a cluster holds from a date on (for clusters no collector reports)."

    def add_arguments(self, parser):
        parser.add_argument("cluster")
        parser.add_argument("model")
        parser.add_argument("count", type=int)
        parser.add_argument("--valid-from", required=True, help="YYYY-MM-DD or ISO 8601 time (UTC)")

    def handle(self, *args, cluster, model, count, valid_from, **options):
        try:
            capacity = capacity_set(cluster=cluster, gpu_model=model, count=count, valid_from=moment_arg(valid_from))
        except ValidationError as exc:
            raise CommandError(errors_of(exc)) from None
        self.stdout.write(f"capacity set: {capacity}")
