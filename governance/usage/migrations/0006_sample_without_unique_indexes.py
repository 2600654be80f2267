"""usage_sample keeps no B-tree index: nothing reads raw samples by id or by (gpu, ts), and those two
indexes were most of what a sample insert cost (about 10 us a row against 3 us for the heap alone).

Reports, charts, exports, findings and costs read the hourly rollups; raw samples are only appended,
moved between partitions and dropped with them. PostgreSQL: the primary key (id, ts) goes too; a
partitioned table needs no primary key, and the sequence behind `id` still numbers every row uniquely,
so Django keeps addressing a sample by `id` (the model's pk) without a constraint to enforce it. A BRIN
index on ts (a few pages per partition, next to free to maintain) serves retention in the DEFAULT
partition and ad-hoc range queries. SQLite keeps its plain table and rowid primary key.
"""

from django.db import migrations, models


def drop_primary_key(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("ALTER TABLE usage_sample DROP CONSTRAINT IF EXISTS usage_sample_pkey")
        cursor.execute("CREATE INDEX usage_sample_ts_brin ON usage_sample USING brin (ts)")


def restore_primary_key(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS usage_sample_ts_brin")
        cursor.execute("ALTER TABLE usage_sample ADD CONSTRAINT usage_sample_pkey PRIMARY KEY (id, ts)")


class Migration(migrations.Migration):
    dependencies = [
        ("usage", "0005_ingestbatch_body_lz4"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="sample", name="sample_gpu_ts_idx"),
        migrations.RunPython(drop_primary_key, restore_primary_key, elidable=False),
    ]
