from django.core.management.base import BaseCommand, CommandError

from governance.api.models import ApiToken
from governance.api.services import api_token_create
from governance.org.models import User


class Command(BaseCommand):
    help = "Create an API token for a user and print it (it is shown only this once)."

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

    def handle(self, *args, username: str, scope: str, name: str, clusters: list[str], **options):
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        if ApiToken.objects.filter(user=user, name=name).exists():
            raise CommandError(f"{username} already has a token named {name!r}")
        try:
            _, raw = api_token_create(user=user, name=name, scope=scope, clusters=clusters)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(raw)
