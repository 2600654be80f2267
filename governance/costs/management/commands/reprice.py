from django.db import transaction

from governance.costs.management.commands._args import month_arg
from governance.costs.reprice import charges_reprice
from governance.costs.settle import month_reprice
from governance.lib.doors import AuditedCommand


class Command(AuditedCommand):
    help = (
        "Bring the charge ledger up to date: re-price what is marked, or whole months (a backfill after an"
        " upgrade). A closed month is re-priced under its frozen terms; any difference lands as corrections."
    )

    def add_arguments(self, parser):
        parser.add_argument("months", nargs="*", help="YYYY-MM: re-price these months in full")

    def handle(self, *args, months, **options):
        for text in months:
            month = month_arg(text)
            with transaction.atomic():
                done = month_reprice(month=month)
            self.stdout.write(f"{month}: {done.job_days} job-days, {done.cluster_days} cluster-days re-priced")
        done = charges_reprice()
        self.stdout.write(f"marked: {done.job_days} job-days, {done.cluster_days} cluster-days re-priced")
