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

    def handle(self, *args, username: str, scope: str, name: str, **options):
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        if ApiToken.objects.filter(user=user, name=name).exists():
            raise CommandError(f"{username} already has a token named {name!r}")
        _, raw = api_token_create(user=user, name=name, scope=scope)
        self.stdout.write(raw)
