"""Replays of issue 15 (team names): a second team named like an existing one is refused everywhere."""

import importlib

import pytest
from django.apps import apps
from django.db import connection

from governance.org.models import TEAM_NAME_TAKEN, Team

pytestmark = pytest.mark.django_db
migration = importlib.import_module("governance.org.migrations.0002_team_name_unique")


def test_the_api_refuses_a_second_team_named_like_an_existing_one_naming_the_field(client, cast):
    client.force_login(cast.admin)

    response = client.post("/api/v1/teams/", {"slug": "vision-2", "name": "VISION"}, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["error"]["details"] == {"name": [TEAM_NAME_TAKEN]}
    assert Team.objects.filter(name__iexact="vision").count() == 1


def test_renaming_a_team_to_another_teams_name_is_refused_but_keeping_its_own_is_fine(client, cast):
    client.force_login(cast.admin)

    taken = client.patch(f"/api/v1/teams/{cast.nlp.pk}/", {"name": "Vision"}, content_type="application/json")
    same = client.patch(f"/api/v1/teams/{cast.nlp.pk}/", {"name": "nlp"}, content_type="application/json")

    assert taken.status_code == 400 and "name" in taken.json()["error"]["details"]
    assert same.status_code == 200


def test_the_admin_refuses_a_second_team_named_like_an_existing_one(client, cast):
    cast.admin.is_superuser = True
    cast.admin.save()
    client.force_login(cast.admin)

    response = client.post("/admin/org/team/add/", {
        "slug": "vision-2", "name": "Vision", "lead_email": "",
        "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0",
    })  # fmt: skip

    assert response.status_code == 200
    assert "A team with this name already exists" in response.content.decode()
    assert not Team.objects.filter(slug="vision-2").exists()


def test_the_migration_renames_existing_duplicates_and_keeps_the_oldest_name(cast):
    constraint = Team._meta.constraints[0]
    with connection.schema_editor() as editor:
        editor.remove_constraint(Team, constraint)
    Team.objects.create(slug="vision-2", name="vision")
    Team.objects.create(slug="vision-3", name="VISION")

    migration.suffix_duplicate_team_names(apps, None)
    with connection.schema_editor() as editor:
        editor.add_constraint(Team, constraint)

    names = dict(Team.objects.values_list("slug", "name"))
    assert names["vision"] == "Vision"
    assert names["vision-2"] == "vision (vision-2)" and names["vision-3"] == "VISION (vision-3)"
