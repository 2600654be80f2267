from django.core.management.base import BaseCommand

from governance.efficiency.services import findings_evaluate_all


class Command(BaseCommand):
    help = "Run every efficiency rule on every job now (what the periodic tasks do, at once)."

    def handle(self, *args, **options) -> None:
        result = findings_evaluate_all()
        self.stdout.write(
            f"jobs: {result.jobs} opened: {result.opened} refreshed: {result.refreshed} resolved: {result.resolved}"
        )
