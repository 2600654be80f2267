from decimal import Decimal

from django.core.management.base import CommandError

from governance.costs.focus import focus_csv
from governance.costs.management.commands._args import month_arg
from governance.costs.selectors import chargeback_by_team
from governance.lib.doors import AuditedCommand
from governance.lib.money import to_cents
from governance.org.models import Team


class Command(AuditedCommand):
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
        if format == "csv":
            for chunk in focus_csv(month=month, team_ids=team_ids):
                self.stdout.write(chunk if isinstance(chunk, str) else chunk.decode(), ending="")
            return
        totals = chargeback_by_team(month=month, team_ids=team_ids)
        currency = totals[0].currency if totals else ""
        self.stdout.write(f"{'team':<24} {'GPU-hours':>12} {'cost':>14} {'idle cost':>14}  {month}")
        for c in totals:
            hours, cost, idle = to_cents(c.gpu_hours), c.printed_cost, c.printed_idle_cost
            self.stdout.write(f"{c.team:<24} {hours:>12} {cost:>14} {idle:>14}  {currency}")
        grand = sum((c.printed_cost for c in totals), Decimal(0))  # the printed lines, as the statement adds them
        self.stdout.write(f"{'total':<24} {'':>12} {grand:>14}  {currency}")
