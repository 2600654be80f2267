"""List endpoints cost the same number of queries for 3 rows as for 30 (no N+1)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from governance.api.models import AuditEntry
from governance.api.services import api_token_create, audit_entry_record
from governance.org.models import Membership, Project, ProjectMapping, Team, User
from tests.factories import ingest, job_record, sample_record

pytestmark = pytest.mark.django_db


def grow(n: int, start: int) -> None:
    """n more rows of every listed kind, all in the nlp team so its lead sees them too."""
    nlp = Team.objects.get(slug="nlp")
    records = []
    for i in range(start, start + n):
        team = Team.objects.create(slug=f"t{i}", name=f"T{i}")
        project = Project.objects.create(team=nlp, slug=f"p{i}", name=f"P{i}")
        user = User.objects.create_user(f"u{i}")
        Membership.objects.create(user=user, team=nlp)
        Membership.objects.create(user=user, team=team)
        ProjectMapping.objects.create(value=f"acct{i}", project=project)
        api_token_create(user=User.objects.get(username="admin"), name=f"tok{i}", scope="read")
        audit_entry_record(actor=user, token=None, action=AuditEntry.Action.CREATE, instance=team)
        records.append(job_record(job_id=f"j{i}", project=f"p{i}", cluster=f"c{i}", user="alice"))
        records.append(sample_record(job_id=f"j{i}", cluster=f"c{i}", node=f"n{i}", gpu_uuid=f"GPU-{i}"))
    ingest(records)


LISTS = [
    "/api/v1/teams/", "/api/v1/projects/", "/api/v1/memberships/", "/api/v1/project-mappings/",
    "/api/v1/clusters/", "/api/v1/nodes/", "/api/v1/gpus/", "/api/v1/jobs/", "/api/v1/tokens/", "/api/v1/audit/",
]  # fmt: skip


def queries(client, url: str) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, {"page_size": 100})
    assert response.status_code == 200, response.content[:300]
    return len(captured), response.json()["count"]


CASES = [("admin", url) for url in LISTS] + [("nlp_lead", url) for url in LISTS if url != "/api/v1/audit/"]
# What the nlp lead's list does not grow by: the new teams and the admin's tokens are not theirs.
NOT_THE_LEADS = ("/api/v1/teams/", "/api/v1/tokens/")


@pytest.mark.parametrize(("role", "url"), CASES)
def test_a_list_costs_the_same_queries_for_3_rows_as_for_30(client, cast, url, role):
    client.force_login(getattr(cast, role))
    grow(3, 0)
    few, few_rows = queries(client, url)
    grow(27, 3)

    many, many_rows = queries(client, url)

    assert many == few
    if role == "admin" or url not in NOT_THE_LEADS:
        assert many_rows >= few_rows + 27
