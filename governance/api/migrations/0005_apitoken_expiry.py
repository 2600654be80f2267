"""Tokens expire. Tokens issued before get the default lifetime from the day of the migration."""

from datetime import timedelta

from django.conf import settings
from django.db import migrations, models
from django.utils import timezone


def give_existing_tokens_the_default_lifetime(apps, schema_editor):
    ApiToken = apps.get_model("api", "ApiToken")
    days = getattr(settings, "API_TOKEN_DEFAULT_DAYS", 90)
    ApiToken.objects.filter(expires_at__isnull=True).update(expires_at=timezone.now() + timedelta(days=days))


class Migration(migrations.Migration):
    dependencies = [("api", "0004_apitoken_clusters")]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(null=True, help_text="After this the token authenticates as invalid."),
        ),
        migrations.RunPython(give_existing_tokens_the_default_lifetime, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(help_text="After this the token authenticates as invalid."),
        ),
    ]
