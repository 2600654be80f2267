"""The table of the database cache: throttle and invalid-token counts, shared by every web worker when CACHE_URL
is unset (settings.CACHES). Created here so that `migrate` is all a deployment, CI or a test database needs."""

from django.core.management.commands.createcachetable import Command as CreateCacheTable
from django.db import migrations

CACHE_TABLE = "gg_cache"  # settings.CACHES["default"]["LOCATION"] without CACHE_URL


def create_cache_table(apps, schema_editor):
    command = CreateCacheTable()
    command.verbosity = 0
    command.create_table(schema_editor.connection.alias, CACHE_TABLE, dry_run=False)


def drop_cache_table(apps, schema_editor):
    schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(CACHE_TABLE)}")


class Migration(migrations.Migration):
    dependencies = [("api", "0006_audit_doors")]

    operations = [migrations.RunPython(create_cache_table, drop_cache_table)]
