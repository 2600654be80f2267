"""The inbox row says which path a batch came by (only an operator's import may create teams and projects),
and a batch that keeps failing is set aside as dead rather than swept forever."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("usage", "0007_ingestbatch_format"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="ingestbatch",
            name="ingestbatch_unprocessed_idx",
        ),
        migrations.AddField(
            model_name="ingestbatch",
            name="dead_at",
            field=models.DateTimeField(
                blank=True,
                help_text="Set after INGEST_MAX_ATTEMPTS failures: never swept again until re-queued.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="ingestbatch",
            name="source",
            field=models.CharField(
                choices=[
                    ("api", "The ingest API (a collector's token)"),
                    ("import", "manage.py import_usage (an operator)"),
                ],
                default="api",
                help_text="Only an operator's import may create the teams and projects its records name.",
                max_length=8,
            ),
        ),
        migrations.AddIndex(
            model_name="ingestbatch",
            index=models.Index(
                condition=models.Q(("dead_at__isnull", True), ("processed_at__isnull", True)),
                fields=["received_at"],
                name="ingestbatch_pending_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="ingestbatch",
            index=models.Index(
                condition=models.Q(("dead_at__isnull", False)), fields=["dead_at"], name="ingestbatch_dead_idx"
            ),
        ),
    ]
