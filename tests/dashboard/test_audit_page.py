"""The audit page: admins search the log by actor, kind, object and time, page through it, and export it as CSV."""

import csv
import io
from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse

from governance.api.models import AuditEntry
from governance.org.models import Team

pytestmark = pytest.mark.django_db


@pytest.fixture
def log(cast):
    """Teams made by the admin through the API on two days, and one team whose name a spreadsheet would run."""
    with time_machine.travel("2026-11-02T09:00:00Z", tick=False):
        Team.objects.create(slug="audio", name="Audio")
    with time_machine.travel("2026-11-20T09:00:00Z", tick=False):
        Team.objects.create(slug="evil", name="=HYPERLINK(1)")


def _rows(response) -> list[dict]:
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_only_platform_admins_open_the_audit_page(client, cast, log):
    for user, status in ((cast.finance, 403), (cast.nlp_lead, 403), (cast.admin, 200)):
        client.force_login(user)
        assert client.get(reverse("dashboard:audit")).status_code == status
        assert client.get(reverse("dashboard:audit-csv")).status_code == status


def test_it_filters_by_kind_object_and_time(client, cast, log):
    client.force_login(cast.admin)

    page = client.get(reverse("dashboard:audit"), {"kind": "org.team", "object": "audio"})
    november_20 = client.get(
        reverse("dashboard:audit"),
        {"kind": "org.team", "since": "2026-11-10T00:00:00Z", "until": "2026-12-01T00:00:00Z"},
    )

    assert [e.object_repr for e in page.context["page"].object_list] == ["Audio"]
    assert [e.object_repr for e in november_20.context["page"].object_list] == ["=HYPERLINK(1)"]


def test_it_filters_by_actor_a_user_or_a_token(client, cast, log):
    client.force_login(cast.admin)
    client.post("/api/v1/teams/", {"slug": "radio", "name": "Radio"}, content_type="application/json")

    mine = client.get(reverse("dashboard:audit"), {"actor": "admin", "door": "api"}).context["page"].object_list

    assert [(e.object_repr, e.door) for e in mine] == [("Radio", "api")]


def test_a_bad_time_is_named_and_shows_nothing(client, cast, log):
    client.force_login(cast.admin)

    response = client.get(reverse("dashboard:audit"), {"since": "last tuesday"})

    assert response.status_code == 200 and b"since" in response.content
    assert list(response.context["page"].object_list) == []


def test_it_pages_through_a_long_log(client, cast):
    for n in range(60):
        Team.objects.create(slug=f"t{n}", name=f"T{n}")
    client.force_login(cast.admin)

    first = client.get(reverse("dashboard:audit"), {"kind": "org.team"}).context["page"]
    second = client.get(reverse("dashboard:audit"), {"kind": "org.team", "page": 2}).context["page"]

    assert (len(first.object_list), len(second.object_list), first.paginator.count) == (50, 12, 62)
    assert not {e.pk for e in first.object_list} & {e.pk for e in second.object_list}


def test_the_csv_has_iso_utc_times_and_formula_safe_cells(client, cast, log):
    client.force_login(cast.admin)

    rows = _rows(client.get(reverse("dashboard:audit-csv"), {"kind": "org.team", "until": "2026-12-01T00:00:00Z"}))

    assert [r["object"] for r in rows] == ["'=HYPERLINK(1)", "Audio"]
    assert rows[1]["at"] == "2026-11-02T09:00:00Z" and rows[1]["action"] == "create" and rows[1]["kind"] == "org.team"


def test_the_api_filters_and_exports_the_same_way(client, cast, log):
    client.force_login(cast.admin)

    found = client.get("/api/v1/audit/", {"kind": "org.team", "object": "audio"}).json()["results"]
    rows = _rows(client.get("/api/v1/audit/csv/", {"kind": "org.team", "until": "2026-11-10T00:00:00Z"}))

    assert [(e["object_repr"], e["action"]) for e in found] == [("Audio", "create")]
    assert [r["object"] for r in rows] == ["Audio"]
    assert client.get("/api/v1/audit/", {"since": "nonsense"}).status_code == 400


def test_no_api_door_writes_an_entry(client, cast, log):
    client.force_login(cast.admin)
    entry = AuditEntry.objects.first()

    assert client.post("/api/v1/audit/", {}, content_type="application/json").status_code == 405
    assert client.delete(f"/api/v1/audit/{entry.pk}/").status_code == 405
    assert client.patch(f"/api/v1/audit/{entry.pk}/", {}, content_type="application/json").status_code == 405
    assert AuditEntry.objects.filter(pk=entry.pk).exists() and entry.at < entry.at + timedelta(seconds=1)
