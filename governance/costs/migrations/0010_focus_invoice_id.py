# The close issues the month's invoice (FOCUS InvoiceId); months closed before get theirs here.

from django.conf import settings
from django.db import migrations, models
from django.utils.text import slugify


def issue_invoices(apps, schema_editor):
    MonthClose = apps.get_model("costs", "MonthClose")
    account = slugify(settings.GOVERNANCE_BILLING_ACCOUNT)[:60]
    for close in MonthClose.objects.filter(invoice_id=""):
        close.invoice_id = f"GG-{close.month:%Y-%m}-{account}"
        close.save(update_fields=["invoice_id"])


class Migration(migrations.Migration):
    dependencies = [
        ("costs", "0009_commitments"),
    ]

    operations = [
        migrations.AddField(
            model_name="monthclose",
            name="invoice_id",
            field=models.CharField(
                default="", help_text="The invoice the close issued: GG-<month>-<account>.", max_length=80
            ),
            preserve_default=False,
        ),
        migrations.RunPython(issue_invoices, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="monthclose",
            constraint=models.UniqueConstraint(fields=("invoice_id",), name="monthclose_unique_invoice"),
        ),
    ]
