from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from governance.lib.doors import AuditedCommand
from governance.org.models import User
from governance.org.oidc import oidc_identity_link


class Command(AuditedCommand):
    help = (
        "Link a person at the OpenID Connect provider (the ID token's iss and sub) to an existing local account: "
        "their sign-ins through the provider then reach that account. Nothing else ever matches an account by name."
    )

    def add_arguments(self, parser):
        parser.add_argument("username", help="the local account")
        parser.add_argument("--issuer", required=True, help="the provider's issuer (the ID token's iss)")
        parser.add_argument("--subject", required=True, help="the person's subject at the provider (sub)")

    def handle(self, *args, username: str, issuer: str, subject: str, **options) -> None:
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"USERNAME: no local account is called {username!r}")
        try:
            identity = oidc_identity_link(user=user, issuer=issuer, subject=subject)
        except ValidationError as exc:
            raise CommandError("; ".join(f"--{k}: {'; '.join(v)}" for k, v in exc.message_dict.items())) from None
        self.stdout.write(f"{identity.subject} at {identity.issuer} signs in as {identity.user.username}")
