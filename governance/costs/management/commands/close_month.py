from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from governance.costs.management.commands._args import errors_of, month_arg
from governance.costs.services import statement_close
from governance.lib.doors import AuditedCommand


class Command(AuditedCommand):
    help = "Close a month: its statement is frozen; later usage for it becomes an adjustment in the next open month."

    def add_arguments(self, parser):
        parser.add_argument("month", help="YYYY-MM")
        parser.add_argument(
            "--accept-unpriced", action="store_true",
            help="Close even though some usage has no rate card (billed 0); what is accepted is kept on record.",
        )  # fmt: skip

    def handle(self, *args, month, accept_unpriced=False, **options):
        try:
            close = statement_close(month=month_arg(month), accept_unpriced=accept_unpriced)
        except ValidationError as exc:
            raise CommandError(errors_of(exc)) from None
        self.stdout.write(f"{month} closed: {close.lines.count()} statement lines frozen")
        for accepted in close.unpriced_accepted:
            self.stdout.write(
                f"accepted unpriced: {accepted['cluster']} {accepted['gpu_model']} {accepted['gpu_hours']} GPU-hours"
            )
