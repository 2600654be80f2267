from governance.lib.doors import AuditedCommand
from governance.remediation.services import remediation_check


class Command(AuditedCommand):
    help = "Run one remediation round now (what the periodic check does): warn, warn again, act or record."

    def handle(self, *args, **options) -> None:
        result = remediation_check()
        self.stdout.write(f"policies: {result.policies} steps: {result.steps}")
