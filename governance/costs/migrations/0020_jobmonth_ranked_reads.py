from django.db import migrations, models
from django.db.models import Count


def count_the_split_job_months(apps, schema_editor):
    """A job re-attributed mid-month has a row per team: each of its rows learns how many there are."""
    job_month = apps.get_model("costs", "JobMonth")
    split = job_month.objects.values("job_id", "month").annotate(n=Count("id")).filter(n__gt=1).order_by()
    for row in split:
        job_month.objects.filter(job_id=row["job_id"], month=row["month"]).update(job_rows=row["n"])


class Migration(migrations.Migration):
    """JobMonth.job_rows, and the indexes a month's costliest jobs are read in order from."""

    dependencies = [
        ("costs", "0019_ledger_summaries_for_pages"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobmonth",
            name="job_rows",
            field=models.PositiveIntegerField(
                default=1, help_text="How many rows the job has this month (more than one: re-attributed mid-month)."
            ),
        ),
        migrations.RunPython(count_the_split_job_months, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="jobmonth",
            index=models.Index(
                condition=models.Q(("job_rows", 1)), fields=["month", "-cost", "job"], name="jobmonth_month_cost_idx"
            ),
        ),
        migrations.AddIndex(
            model_name="jobmonth",
            index=models.Index(
                condition=models.Q(("job_rows", 1)), fields=["month", "-idle_cost", "job"],
                name="jobmonth_month_idle_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="jobmonth",
            index=models.Index(
                condition=models.Q(("job_rows__gt", 1)), fields=["month", "job"], name="jobmonth_month_split_idx"
            ),
        ),
    ]
