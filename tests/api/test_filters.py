"""Issue 31 item 6: the API's filters say what they take. `?job=` is the scheduler's id (or `cluster/id`), an
unknown team or cluster is a 400 naming it, and a query parameter no list takes is a 400 naming it."""

import pytest

from governance.efficiency.models import Finding
from governance.efficiency.services import findings_evaluate_all
from governance.usage.models import Job
from tests.api.conftest import usage_records
from tests.factories import at, ingest

pytestmark = pytest.mark.django_db
V1 = "/api/v1"


@pytest.fixture
def twins(world):
    """Job 1281 on c1 and on c2, both idle (so both have findings); their database ids are not 1281."""
    idle = usage_records("1281", "bob", "llm-pretrain", "nlp", "GPU-y", sm_util=0.0)
    on_c2 = [{**record, "cluster": "c2"} for record in idle]
    ingest([*usage_records("1281", "bob", "llm-pretrain", "nlp", "GPU-x", sm_util=0.0), *on_c2])
    findings_evaluate_all(now=at("2026-11-10T00:00:00Z"))
    return {job.cluster.name: job for job in Job.objects.filter(external_id="1281")}


def results(response) -> list[dict]:
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_it_finds_a_jobs_findings_by_the_schedulers_id_on_every_cluster(client, world, twins):
    client.force_login(world.cast.admin)

    found = results(client.get(f"{V1}/findings/", {"job": "1281", "page_size": 100}))

    assert {twins["c1"].pk, twins["c2"].pk} != {1281}
    assert found and {(r["cluster"], r["job_id"]) for r in found} == {("c1", "1281"), ("c2", "1281")}
    assert len(found) == Finding.objects.filter(job__external_id="1281").count()


def test_it_finds_one_clusters_job_by_cluster_slash_id(client, world, twins):
    client.force_login(world.cast.admin)

    found = results(client.get(f"{V1}/findings/", {"job": "c2/1281", "page_size": 100}))

    assert found and {r["job_pk"] for r in found} == {twins["c2"].pk}


def test_the_database_id_is_not_a_schedulers_id_but_job_pk_takes_it(client, world, twins):
    client.force_login(world.cast.admin)
    bob = world.job_bob
    other_pk = Job.objects.exclude(external_id=str(bob.pk)).exclude(pk=bob.pk).order_by("-pk").first().pk

    by_pk = results(client.get(f"{V1}/findings/", {"job_pk": bob.pk, "page_size": 100}))
    by_scheduler_id = results(client.get(f"{V1}/findings/", {"job": str(other_pk), "page_size": 100}))

    assert by_pk and {r["job_pk"] for r in by_pk} == {bob.pk}
    assert by_scheduler_id == []


def test_a_kubernetes_pod_id_with_a_slash_is_found_as_it_is(client, world):
    ingest(usage_records("ml/trainer-0", "bob", "llm-pretrain", "nlp", "GPU-k", sm_util=0.0))
    findings_evaluate_all(now=at("2026-11-10T00:00:00Z"))
    client.force_login(world.cast.admin)

    bare = results(client.get(f"{V1}/findings/", {"job": "ml/trainer-0"}))
    with_cluster = results(client.get(f"{V1}/findings/", {"job": "c1/ml/trainer-0"}))

    assert bare and {r["job_id"] for r in bare} == {"ml/trainer-0"}
    assert [r["id"] for r in with_cluster] == [r["id"] for r in bare]


@pytest.mark.parametrize(
    "url",
    [f"{V1}/findings/?team=doesnotexist", f"{V1}/jobs/?team=doesnotexist", f"{V1}/budgets/?team=doesnotexist",
     f"{V1}/anomalies/?team=doesnotexist", f"{V1}/projects/?team=doesnotexist"],
)  # fmt: skip
def test_an_unknown_team_is_a_400_naming_it(client, world, url):
    client.force_login(world.cast.admin)

    response = client.get(url)

    assert response.status_code == 400
    assert "team" in response.json()["error"]["details"]
    assert "doesnotexist" in response.json()["error"]["details"]["team"][0]


def test_another_teams_slug_is_a_400_for_a_lead_who_may_not_see_it(client, world):
    client.force_login(world.cast.vision_lead)

    other = client.get(f"{V1}/findings/?team=nlp")
    own = client.get(f"{V1}/findings/?team=vision")

    assert other.status_code == 400 and "team" in other.json()["error"]["details"]
    assert own.status_code == 200 and own.json()["results"]


@pytest.mark.parametrize("url", [f"{V1}/jobs/?cluster=nowhere", f"{V1}/nodes/?cluster=nowhere",
                                 f"{V1}/gpus/?cluster=nowhere", f"{V1}/rates/?cluster=nowhere"])  # fmt: skip
def test_an_unknown_cluster_is_a_400_naming_it(client, world, url):
    client.force_login(world.cast.admin)

    response = client.get(url)

    assert response.status_code == 400
    assert "nowhere" in response.json()["error"]["details"]["cluster"][0]


def test_a_known_cluster_and_team_still_filter(client, world):
    client.force_login(world.cast.admin)

    jobs = results(client.get(f"{V1}/jobs/", {"cluster": "c1", "team": "vision"}))

    assert [j["external_id"] for j in jobs] == ["3"]


@pytest.mark.parametrize(
    "url",
    [f"{V1}/findings/?teem=nlp", f"{V1}/jobs/?clster=c1", f"{V1}/teams/?name=NLP", f"{V1}/audit/?who=admin",
     f"{V1}/ingest/dead/?cluster=c1", f"{V1}/unattributed/?month=2026-11&team=nlp", f"{V1}/gpus/?page=1&sort=id"],
)  # fmt: skip
def test_an_unknown_query_parameter_is_a_400_naming_it_on_every_list(client, world, url):
    client.force_login(world.cast.admin)
    unknown = url.rsplit("&", 1)[-1].split("?")[-1].split("=")[0]

    response = client.get(url)

    assert response.status_code == 400, response.content
    details = response.json()["error"]["details"]
    assert list(details) == [unknown]
    assert "no such query parameter" in details[unknown][0]


@pytest.mark.parametrize(
    "url",
    [f"{V1}/findings/?team=nlp&rule=idle_gpu&state=live&job=2&job_pk=1&mine=false&ordering=-waste&page=1"
     "&page_size=5&format=json",
     f"{V1}/jobs/?cluster=c1&team=nlp&project=llm-pretrain&user=bob&running=false&started_after=2026-11-01T00:00:00Z"
     "&ordering=-start_time",
     f"{V1}/unattributed/?month=2026-11&page=1", f"{V1}/ingest/dead/?page_size=10"],
)  # fmt: skip
def test_the_documented_parameters_are_all_taken(client, world, url):
    client.force_login(world.cast.admin)

    assert client.get(url).status_code == 200


def test_a_detail_and_its_actions_keep_their_own_parameters(client, world):
    client.force_login(world.cast.admin)

    usage = client.get(f"{V1}/jobs/{world.job_bob.pk}/usage/?resolution=day")

    assert usage.status_code == 200 and usage.json()["resolution"] == "day"


def test_findings_are_in_the_api_root(client, world):
    root = client.get(f"{V1}/").json()

    assert root["findings"].endswith("/api/v1/findings/")
    client.force_login(world.cast.admin)
    assert client.get(root["findings"]).status_code == 200


def test_an_unknown_project_or_one_of_another_team_is_a_400_naming_it(client, world):
    client.force_login(world.cast.admin)

    unknown = client.get(f"{V1}/jobs/?project=nope")
    mappings = client.get(f"{V1}/project-mappings/?project=nope")
    known = results(client.get(f"{V1}/jobs/?project=detector"))
    client.force_login(world.cast.vision_lead)
    other_team = client.get(f"{V1}/jobs/?project=llm-pretrain")

    assert unknown.status_code == 400 and "nope" in unknown.json()["error"]["details"]["project"][0]
    assert mappings.status_code == 400 and "project" in mappings.json()["error"]["details"]
    assert [j["external_id"] for j in known] == ["3"]
    assert other_team.status_code == 400 and "project" in other_team.json()["error"]["details"]
