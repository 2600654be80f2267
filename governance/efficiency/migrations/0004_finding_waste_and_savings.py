from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('efficiency', '0003_findings_evaluation_alerts'),
        ('usage', '0011_nullable_metrics_and_gpus'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='finding',
            options={'ordering': ['-waste', '-id']},
        ),
        migrations.RemoveIndex(
            model_name='finding',
            name='finding_state_waste_idx',
        ),
        # The monthly figure the rules computed stays, as what it always was: the savings estimate.
        migrations.RenameField(model_name='finding', old_name='monthly_waste', new_name='savings'),
        migrations.AlterField(
            model_name='finding',
            name='savings',
            field=models.DecimalField(decimal_places=2, default=0, help_text='What following the advice would save a month: an estimate, never added across findings.', max_digits=14),
        ),
        migrations.AddField(
            model_name='finding',
            name='waste',
            field=models.DecimalField(decimal_places=2, default=0, help_text="The cost of the GPU-hours this finding says were wasted, priced from the job's ledger rows; each wasted GPU-hour counts under one finding only, so wastes add up to at most the bill.", max_digits=14),
        ),
        migrations.AddField(
            model_name='finding',
            name='wasted_gpu_hours',
            field=models.DecimalField(decimal_places=4, default=0, max_digits=14),
        ),
        migrations.AddIndex(
            model_name='finding',
            index=models.Index(fields=['state', '-waste'], name='finding_state_waste_idx'),
        ),
    ]
