import json

from governance.efficiency.models import Finding
from governance.efficiency.rules import RULES
from governance.efficiency.selectors import findings_visible
from governance.lib.doors import AuditedCommand
from governance.org.models import User


def finding_row(f: Finding) -> dict:
    return {
        "job_id": f.job.external_id,
        "cluster": f.job.cluster.name,
        "team": f.job.project.team.slug if f.job.project else None,
        "rule": f.rule,
        "severity": f.severity,
        "state": f.state,
        "evidence": f.evidence,
        "waste": str(f.waste),
        "savings": str(f.savings),
        "currency": f.currency,
        "advice": f.advice,
    }


class Command(AuditedCommand):
    help = "List findings, most money first (as an admin sees them): the API's list on the command line."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--team", help="team slug")
        parser.add_argument("--rule", choices=RULES)
        parser.add_argument("--state", choices=[*Finding.State.values, "live"])
        parser.add_argument("--job", help="the scheduler's job id, or cluster/id")
        parser.add_argument("--format", choices=["json", "table"], default="table")

    def handle(self, *args, **options) -> None:
        viewer = User(username="manage.py", role=User.Role.ADMIN, is_active=True)
        qs = findings_visible(
            user=viewer, team=options["team"], rule=options["rule"], state=options["state"], job=options["job"]
        )
        rows = [finding_row(f) for f in qs]
        if options["format"] == "json":
            self.stdout.write(json.dumps(rows, indent=2))
            return
        if not rows:
            self.stdout.write("no findings match")
        for r in rows:
            self.stdout.write(
                f"{r['waste']:>12} {r['currency']}  {r['rule']:<20} {r['severity']:<8} {r['state']:<12} "
                f"{r['cluster']}/{r['job_id']}  {r['advice']}"
            )
