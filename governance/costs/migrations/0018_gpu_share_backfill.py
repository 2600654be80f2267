from django.db import migrations

from governance.costs.backfill import gpu_share_marks


def forwards(apps, schema_editor):
    gpu_share_marks(
        charge=apps.get_model("costs", "Charge"),
        month_close=apps.get_model("costs", "MonthClose"),
        pricing_mark=apps.get_model("usage", "PricingMark"),
    )


class Migration(migrations.Migration):
    """Open days whose usage rows of jobs on a share predate gpu_share are marked for the worker to re-price."""

    dependencies = [
        ("costs", "0017_ledger_gpu_share"),
        ("usage", "0020_job_runs_db_default"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
