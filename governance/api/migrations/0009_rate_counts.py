# The per-client request counters of governance/api/counters.py.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('api', '0008_apiadmin_verbose_names'),
    ]

    operations = [
        migrations.CreateModel(
            name='RateCount',
            fields=[
                ('key', models.CharField(help_text='The counter: its scope and its client.', max_length=200, primary_key=True, serialize=False)),
                ('window_end', models.BigIntegerField(help_text='When the window counted ends, in seconds since the epoch.')),
                ('count', models.BigIntegerField()),
            ],
        ),
    ]
