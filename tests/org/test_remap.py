"""A project mapping added, changed or deleted moves the jobs that name its account, and only those."""

import pytest

from governance.org.models import ProjectMapping
from governance.usage.models import Job
from governance.usage.remap import jobs_remap
from tests.factories import ingest, job_record

pytestmark = pytest.mark.django_db


def _project(external_id: str, cluster: str = "c1") -> str | None:
    job = Job.objects.select_related("project").get(external_id=external_id, cluster__name=cluster)
    return job.project.slug if job.project else None


def test_mapping_an_account_through_the_api_moves_its_jobs_and_deleting_it_moves_them_back(
    client, cast, django_capture_on_commit_callbacks
):
    ingest([job_record(job_id="1", project="acct-x", team=None), job_record(job_id="2", project="other", team=None)])
    assert (_project("1"), _project("2")) == (None, None)  # no mapping, no project of that name: unattributed
    client.force_login(cast.admin)

    with django_capture_on_commit_callbacks(execute=True):
        created = client.post("/api/v1/project-mappings/", {"value": "acct-x", "project": "llm-pretrain"},
                              content_type="application/json")  # fmt: skip
    assert created.status_code == 201
    assert (_project("1"), _project("2")) == ("llm-pretrain", None)

    with django_capture_on_commit_callbacks(execute=True):
        client.patch(f"/api/v1/project-mappings/{created.json()['id']}/", {"project": "detector"},
                     content_type="application/json")  # fmt: skip
    assert _project("1") == "detector"

    with django_capture_on_commit_callbacks(execute=True):
        client.delete(f"/api/v1/project-mappings/{created.json()['id']}/")
    assert _project("1") is None


def test_a_cluster_scoped_mapping_moves_only_that_clusters_jobs(cast):
    ingest([job_record(job_id="1", cluster="east", project="shared", team=None),
            job_record(job_id="1", cluster="west", project="shared", team=None)])  # fmt: skip
    ProjectMapping.objects.create(value="shared", cluster_name="east", project=cast.nlp.projects.get())

    assert jobs_remap(accounts=["shared"]) == 1
    assert (_project("1", "east"), _project("1", "west")) == ("llm-pretrain", None)
    assert jobs_remap(accounts=["shared"]) == 0  # nothing left to move


def test_mapping_an_account_in_the_admin_moves_its_jobs(client, cast, django_capture_on_commit_callbacks):
    from governance.org.models import User

    ingest([job_record(job_id="1", project="acct-y", team=None)])
    project = cast.vision.projects.get()
    client.force_login(User.objects.create_superuser("root", password="pw-root-1234"))
    form = {
        "slug": project.slug, "name": project.name, "team": cast.vision.pk,
        "mappings-TOTAL_FORMS": "1", "mappings-INITIAL_FORMS": "0", "mappings-MIN_NUM_FORMS": "0",
        "mappings-MAX_NUM_FORMS": "1000", "mappings-0-kind": "slurm_account", "mappings-0-value": "acct-y",
        "mappings-0-cluster_name": "", "mappings-0-project": project.pk,
    }  # fmt: skip

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/admin/org/project/{project.pk}/change/", form)

    assert response.status_code == 302, response.content[:500]
    assert _project("1") == "detector"
