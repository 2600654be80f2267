"""Team names are unique (ignoring case). Existing duplicates keep the oldest team's name; the others get
their slug appended, e.g. "Vision (vision-2)", so nothing is lost and an admin can rename them."""

from django.db import migrations, models
from django.db.models.functions import Lower


def suffix_duplicate_team_names(apps, schema_editor):
    Team = apps.get_model("org", "Team")
    taken: set[str] = set()
    for team in Team.objects.order_by("created_at", "pk"):
        name = team.name
        if name.lower() in taken:
            name = f"{team.name} ({team.slug})"[:200]
            n = 2
            while name.lower() in taken:
                name = f"{team.name} ({team.slug}-{n})"[:200]
                n += 1
            Team.objects.filter(pk=team.pk).update(name=name)
        taken.add(name.lower())


class Migration(migrations.Migration):
    dependencies = [("org", "0001_initial")]

    operations = [
        migrations.RunPython(suffix_duplicate_team_names, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="team",
            constraint=models.UniqueConstraint(
                Lower("name"),
                name="team_unique_name",
                violation_error_message="A team with this name already exists (names are compared ignoring case).",
            ),
        ),
    ]
