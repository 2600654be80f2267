from decimal import Decimal

from django.core.management.base import BaseCommand, CommandError

from governance.costs.focus import focus_csv
from governance.costs.management.commands._args import month_arg
from governance.costs.selectors import statement_charges
from governance.lib.money import to_cents
from governance.org.models import Team


class Command(BaseCommand):
    help = "A month's chargeback: FOCUS 1.2 CSV (one row per job per day) or a table of teams."

    def add_arguments(self, parser):
        parser.add_argument("month", help="YYYY-MM")
        parser.add_argument("--team", default=None, help="team slug")
        parser.add_argument("--format", choices=["csv", "table"], default="table")

    def handle(self, *args, month, team, format, **options):
        month = month_arg(month)
        team_ids = None
        if team:
            found = Team.objects.filter(slug=team).values_list("pk", flat=True).first()
            if found is None:
                raise CommandError(f"--team: no team with slug {team!r}")
            team_ids = [found]
        charges = statement_charges(month=month, team_ids=team_ids)
        if format == "csv":
            for chunk in focus_csv(charges, month=month):
                self.stdout.write(chunk, ending="")
            return
        totals: dict[str, list[Decimal]] = {}
        currency = ""
        for c in charges:
            row = totals.setdefault(c.team, [Decimal(0)] * 3)
            row[0] += c.gpu_hours
            row[1] += c.cost
            row[2] += c.idle_cost
            currency = c.currency
        self.stdout.write(f"{'team':<24} {'GPU-hours':>12} {'cost':>14} {'idle cost':>14}  {month}")
        for name, (hours, cost, idle) in sorted(totals.items()):
            self.stdout.write(f"{name:<24} {to_cents(hours):>12} {to_cents(cost):>14} {to_cents(idle):>14}  {currency}")
        grand = sum((row[1] for row in totals.values()), Decimal(0))
        self.stdout.write(f"{'total':<24} {'':>12} {to_cents(grand):>14}  {currency}")
