from governance.efficiency.services import findings_evaluate_all
from governance.lib.doors import AuditedCommand


class Command(AuditedCommand):
    help = "Run every efficiency rule on every job now (what the periodic tasks do, at once)."

    def handle(self, *args, **options) -> None:
        result = findings_evaluate_all()
        self.stdout.write(
            f"jobs: {result.jobs} opened: {result.opened} refreshed: {result.refreshed} resolved: {result.resolved}"
        )
