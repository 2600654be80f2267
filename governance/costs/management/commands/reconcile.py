from django.core.management.base import CommandError

from governance.costs.management.commands._args import month_arg
from governance.costs.selectors import reconcile
from governance.lib.doors import AuditedCommand
from governance.lib.money import to_cents


class Command(AuditedCommand):
    help = "Check that per cluster, team charges + unallocated = capacity x rate, to the cent; non-zero exit if not."

    def add_arguments(self, parser):
        parser.add_argument("month", help="YYYY-MM")

    def handle(self, *args, month, **options):
        result = reconcile(month=month_arg(month))
        for check in result.clusters:
            self.stdout.write(
                f"{check.cluster}: charged {to_cents(check.charged)} {result.currency}, "
                f"capacity x rate {to_cents(check.capacity_cost)} {result.currency}, off by {check.off_by}"
            )
        if not result.ok:
            raise CommandError(f"{result.month} does not reconcile:\n" + "\n".join(result.problems))
        self.stdout.write(f"{result.month} reconciles to the cent")
