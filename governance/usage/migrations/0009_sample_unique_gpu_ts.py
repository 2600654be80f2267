"""A GPU's reading at one moment is stored once: a unique (gpu_id, ts) index, per monthly partition on
PostgreSQL. Readings stored twice before (a batch replayed under a new id) are removed first, keeping the
first; the hourly rollups they were folded into keep their counts (re-derive them by hand if it matters).
"""

from django.db import migrations, models

DROP_DUPLICATES = "DELETE FROM usage_sample WHERE id NOT IN (SELECT min(id) FROM usage_sample GROUP BY gpu_id, ts)"


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0001_initial"),
        ("usage", "0008_ingestbatch_source_and_dead_letter"),
    ]

    operations = [
        migrations.RunSQL(DROP_DUPLICATES, migrations.RunSQL.noop, elidable=False),
        migrations.AddConstraint(
            model_name="sample",
            constraint=models.UniqueConstraint(fields=("gpu", "ts"), name="sample_unique_gpu_ts"),
        ),
    ]
