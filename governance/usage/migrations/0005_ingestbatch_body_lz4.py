"""PostgreSQL: compress inbox bodies with lz4 rather than pglz, several times cheaper on the ingest path."""

from django.db import migrations


def body_compression(method):
    def apply(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        with schema_editor.connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND %s = ANY(enumvals)", [method])
            if cursor.fetchone():  # a server built without lz4 keeps pglz
                cursor.execute(f"ALTER TABLE usage_ingestbatch ALTER COLUMN body SET COMPRESSION {method}")

    return apply


class Migration(migrations.Migration):
    dependencies = [
        ("usage", "0004_sample_job_index_unused"),
    ]

    operations = [
        migrations.RunPython(body_compression("lz4"), body_compression("pglz"), elidable=False),
    ]
