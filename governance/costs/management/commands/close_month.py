from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from governance.costs.management.commands._args import errors_of, month_arg
from governance.costs.services import statement_close
from governance.lib.doors import AuditedCommand


class Command(AuditedCommand):
    help = "Close a month: its statement is frozen; later usage for it becomes an adjustment in the next open month."

    def add_arguments(self, parser):
        parser.add_argument("month", help="YYYY-MM")

    def handle(self, *args, month, **options):
        try:
            close = statement_close(month=month_arg(month))
        except ValidationError as exc:
            raise CommandError(errors_of(exc)) from None
        self.stdout.write(f"{month} closed: {close.lines.count()} statement lines frozen")
