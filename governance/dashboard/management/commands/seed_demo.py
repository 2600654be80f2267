import io
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.core.management import call_command
from django.db import transaction

from collectors.simulate import GPU_MODEL, SimulatedCluster
from governance.costs.models import RateCard
from governance.lib.doors import AuditedCommand
from governance.org.models import Membership, Team, User
from governance.usage.models import Job
from governance.usage.services import usage_records_import

DEMO_USERS: list[tuple[str, str, str, str | None, str | None]] = [
    # username, password, role, team, membership role
    ("admin", "demo-admin", User.Role.ADMIN, None, None),
    ("finance", "demo-finance", User.Role.FINANCE, None, None),
    ("nlp-lead", "demo-lead", User.Role.MEMBER, "nlp", Membership.Role.LEAD),
    ("alice", "demo-engineer", User.Role.MEMBER, "nlp", Membership.Role.ENGINEER),
    ("vision-lead", "demo-lead", User.Role.MEMBER, "vision", Membership.Role.LEAD),
]
CHUNK = 20_000
ROLE_WORDS: dict[str, str] = {
    User.Role.ADMIN: "platform admin, sees and changes everything; rate cards and teams under /admin/",
    User.Role.FINANCE: "finance, every team's costs; closes a month and exports it at /costs/",
    Membership.Role.LEAD: "lead of team {team}: the team's month, jobs and findings at /costs/team/{team}/",
    Membership.Role.ENGINEER: "engineer in team {team}: their own jobs and advice at /me/, the team's totals",
}


class Command(AuditedCommand):
    help = "Load a month of simulated usage through the ingest path (only into an empty database) and demo users."

    def add_arguments(self, parser):
        parser.add_argument("--gpus", type=int, default=32)
        parser.add_argument("--days", type=int, default=30)
        parser.add_argument("--interval", type=int, default=600, help="seconds between samples")
        parser.add_argument("--force", action="store_true", help="load even if the database has jobs")

    def handle(self, *args, gpus: int, days: int, interval: int, force: bool, **options):
        if Job.objects.exists() and not force:
            self.stdout.write("database already has usage; demo data not loaded (use --force)")
        else:
            self._load(gpus=gpus, days=days, interval=interval)
            # Without beat (the embedded default) nothing evaluates on a schedule: give the demo its findings now.
            out = io.StringIO()
            call_command("evaluate_findings", stdout=out)
            counts = dict(re.findall(r"(\w+): (\d+)", out.getvalue()))
            self.stdout.write(
                f"findings: the efficiency rules looked at {counts.get('jobs', '?')} jobs and opened"
                f" {counts.get('opened', '?')} findings (advice with its saving; see /findings/)"
            )
        self._users()

    def _load(self, *, gpus: int, days: int, interval: int) -> None:
        end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        start = end - timedelta(days=days)
        RateCard.objects.get_or_create(
            gpu_model=GPU_MODEL,
            cluster=None,
            valid_from=start - timedelta(days=90),
            defaults={"price_per_gpu_hour": Decimal("2.50"), "currency": "USD"},
        )
        sim = SimulatedCluster(cluster="demo", gpus=gpus, start=start, end=end)
        chunk: list = []
        stored = 0
        source = f"demo-{start:%Y%m%d%H}-{gpus}-{interval}"
        with transaction.atomic():
            for record in sim.history(timedelta(seconds=interval)):
                chunk.append(record)
                if len(chunk) >= CHUNK:
                    stored += usage_records_import(records=chunk, source_digest=source, chunk=stored).records
                    chunk = []
            if chunk:
                stored += usage_records_import(records=chunk, source_digest=source, chunk=stored).records
        self.stdout.write(
            f"demo: {len(sim.jobs)} simulated jobs on {gpus} GPUs from {start:%Y-%m-%d} to {end:%Y-%m-%d}, sent as"
            f" {stored} records (job records and one sample per GPU every {interval} s) through the ingest path,"
            " then priced into the charge ledger"
        )

    def _users(self) -> None:
        for username, password, role, team_slug, member_role in DEMO_USERS:
            user, created = User.objects.get_or_create(username=username, defaults={"role": role})
            if created:
                user.set_password(password)
                user.is_staff = user.is_superuser = role == User.Role.ADMIN
                user.save()
            if team_slug and member_role:
                team, _ = Team.objects.get_or_create(slug=team_slug, defaults={"name": team_slug})
                Membership.objects.get_or_create(user=user, team=team, defaults={"role": member_role})
        self.stdout.write("demo users (username / password: role, and the page to open first):")
        for username, password, role, team_slug, member_role in DEMO_USERS:
            self.stdout.write(f"  {username} / {password}: {ROLE_WORDS[member_role or role]}"
                              .format(team=team_slug))  # fmt: skip
