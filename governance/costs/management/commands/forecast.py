import json
from datetime import date

from django.core.management.base import CommandError
from django.utils import timezone

from governance.costs.forecasts import last_whole_day, spend_forecast
from governance.costs.management.commands._args import month_arg
from governance.lib.doors import AuditedCommand


class Command(AuditedCommand):
    help = "Month-end spend forecast per team with its 80% interval, from the charges up to the end of --as-of."

    def add_arguments(self, parser):
        parser.add_argument("month", help="YYYY-MM")
        parser.add_argument("--as-of", help="YYYY-MM-DD: charges of later days are ignored (default: yesterday)")
        parser.add_argument("--format", choices=["text", "json"], default="text")

    def handle(self, *args, month, as_of, format, **options):
        parsed = month_arg(month)
        try:
            day = date.fromisoformat(as_of) if as_of else last_whole_day(parsed, timezone.now())
        except ValueError:
            raise CommandError(f"--as-of: {as_of!r} is not a date (YYYY-MM-DD)") from None
        rows = [
            {"team": f.name, "forecast": str(f.forecast), "low": str(f.low), "high": str(f.high),
             "currency": f.currency}
            for f in spend_forecast(month=parsed, as_of=day) if f.key is not None
        ]  # fmt: skip
        if format == "json":
            self.stdout.write(json.dumps(rows, indent=2))
            return
        for r in rows:
            self.stdout.write(f"{r['team']}: {r['forecast']} {r['currency']} (80%: {r['low']} to {r['high']})")
