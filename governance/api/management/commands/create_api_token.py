from datetime import timedelta

from django.core.management.base import CommandError
from django.utils import timezone

from governance.api.models import ApiToken
from governance.api.services import TokenRefused, api_token_create
from governance.lib.doors import AuditedCommand
from governance.org.models import User


class Command(AuditedCommand):
    help = (
        "Create an API token for a user and print it (it is shown only this once). "
        "Ingest and admin tokens are for platform admins only."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--scope", required=True, choices=ApiToken.Scope.values)
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--cluster",
            action="append",
            default=[],
            dest="clusters",
            help="a cluster the token may report (repeat for several); an ingest token without one reports none",
        )
        parser.add_argument("--days", type=int, help="Lifetime in days (default: API_TOKEN_DEFAULT_DAYS).")

    def handle(self, *args, username: str, scope: str, name: str, clusters: list[str], days: int | None, **options):
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        if ApiToken.objects.filter(user=user, name=name).exists():
            raise CommandError(f"{username} already has a token named {name!r}")
        expires_at = timezone.now() + timedelta(days=days) if days is not None else None
        try:
            _, raw = api_token_create(user=user, name=name, scope=scope, clusters=clusters, expires_at=expires_at)
        except TokenRefused as exc:
            raise CommandError(f"{username}: {exc}") from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(raw)
