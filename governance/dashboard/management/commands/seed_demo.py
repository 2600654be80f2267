from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction

from collectors.simulate import GPU_MODEL, SimulatedCluster
from governance.costs.models import RateCard
from governance.org.models import Membership, Team, User
from governance.usage.models import Job
from governance.usage.services import usage_records_import

DEMO_USERS = [
    # username, password, role, team, membership role
    ("admin", "demo-admin", User.Role.ADMIN, None, None),
    ("finance", "demo-finance", User.Role.FINANCE, None, None),
    ("nlp-lead", "demo-lead", User.Role.MEMBER, "nlp", Membership.Role.LEAD),
    ("alice", "demo-engineer", User.Role.MEMBER, "nlp", Membership.Role.ENGINEER),
    ("vision-lead", "demo-lead", User.Role.MEMBER, "vision", Membership.Role.LEAD),
]
CHUNK = 20_000


class Command(BaseCommand):
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
            # Give the demo its findings now rather than at the first scheduled pass, 15 minutes after serving.
            call_command("evaluate_findings", stdout=self.stdout)
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
            f"demo: {len(sim.jobs)} jobs, {stored} records on {gpus} GPUs from {start:%Y-%m-%d} to {end:%Y-%m-%d}"
        )

    def _users(self) -> None:
        for username, password, role, team_slug, member_role in DEMO_USERS:
            user, created = User.objects.get_or_create(username=username, defaults={"role": role})
            if created:
                user.set_password(password)
                user.is_staff = user.is_superuser = role == User.Role.ADMIN
                user.save()
            if team_slug:
                team, _ = Team.objects.get_or_create(slug=team_slug, defaults={"name": team_slug})
                Membership.objects.get_or_create(user=user, team=team, defaults={"role": member_role})
        self.stdout.write("demo users (username / password):")
        for username, password, role, team_slug, _ in DEMO_USERS:
            where = f" of {team_slug}" if team_slug else ""
            self.stdout.write(f"  {username} / {password}  ({role}{where})")
