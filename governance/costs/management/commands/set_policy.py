from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from governance.costs.management.commands._args import errors_of, moment_arg
from governance.costs.services import policy_set
from governance.fleet.models import Cluster
from governance.lib.doors import AuditedCommand


class Command(AuditedCommand):
    help = "Bill a cluster's unallocated capacity as its own line (show) or shared among teams (share) from a date on."

    def add_arguments(self, parser):
        parser.add_argument("cluster")
        parser.add_argument("policy", choices=Cluster.UnallocatedPolicy.values)
        parser.add_argument("--valid-from", required=True, help="YYYY-MM-DD or ISO 8601 time (UTC)")

    def handle(self, *args, cluster, policy, valid_from, **options):
        try:
            term = policy_set(cluster=cluster, policy=policy, valid_from=moment_arg(valid_from))
        except ValidationError as exc:
            raise CommandError(errors_of(exc)) from None
        self.stdout.write(f"policy set: {term}")
