"""Migration check: a project's workloads on two GPU generations side by side, with a verdict in words."""

import csv
import io
from datetime import date, timedelta

import pytest

from tests.efficiency.conftest import START, a_job, gpu
from tests.factories import H100, ingest, iso, rate
from tests.invariants import assert_billing_invariants

B200 = "NVIDIA B200"
B200_MIB = 183359.0
TODAY = date(2026, 11, 30)


def run(job_id: str, day: int, *, hours: int, sm: float, workload: str, new: bool) -> list[dict]:
    """One run of `workload`: one GPU for `hours` at `sm` percent, on c1's H100s or (new) on c2's B200s."""
    start = START + timedelta(days=day)
    where = {"cluster": "c2", "gpu_model": B200} if new else {}
    record = a_job(minutes=hours * 60, job_id=job_id, start_time=iso(start),
                   submit_time=iso(start - timedelta(hours=1)), end_time=iso(start + timedelta(hours=hours)),
                   labels={"workload": workload}, **where)  # fmt: skip
    samples = gpu(minutes=hours * 60, offset=day * 24 * 60, job_id=job_id, uuid=f"GPU-{job_id}", sm_util=sm,
                  **({"cluster": "c2", "gpu_model": B200, "mem_total_mib": B200_MIB} if new else {}))  # fmt: skip
    return [record, *samples]


@pytest.fixture
def moved(cast):
    """The eval moved to B200 and got cheaper per run; pretraining moved and got dearer (SM fell to 30%)."""
    rate(model=H100, price="2.00")
    rate(model=B200, price="5.00")
    records = []
    for n in range(3):
        records += run(f"eval-old-{n}", n, hours=4, sm=90.0, workload="eval", new=False)  # 8.00 a run
        records += run(f"eval-new-{n}", 10 + n, hours=1, sm=90.0, workload="eval", new=True)  # 5.00 a run
    for n in range(2):
        records += run(f"pre-old-{n}", 3 + n, hours=2, sm=80.0, workload="pretrain", new=False)  # 4.00 a run
        records += run(f"pre-new-{n}", 13 + n, hours=2, sm=30.0, workload="pretrain", new=True)  # 10.00 a run
    ingest(records)
    from governance.org.models import Project

    return Project.objects.get(slug="llm-pretrain")


def test_each_workload_is_compared_per_run_with_the_reason_where_the_new_gpus_cost_more(moved):
    from governance.efficiency.migration import migration_check

    check = migration_check(project=moved, today=TODAY)

    assert [s.label for s in check.sides] == [f"{H100} on c1", f"{B200} on c2"]
    eval_, pretrain = check.workloads
    assert (eval_.name, [s.runs for s in eval_.sides]) == ("eval", [3, 3])
    assert [s.cost_per_run for s in eval_.sides] == [8, 5]
    assert f"On {B200} on c2 the eval runs cost 0.62x per run" in eval_.verdict
    assert eval_.verdict.endswith("move more of them.")
    assert [s.cost_per_run for s in pretrain.sides] == [4, 10]
    assert "the pretrain runs cost 2.50x per run" in pretrain.verdict
    assert "because SM stayed at" in pretrain.verdict and "retune parallelism and batch size" in pretrain.verdict
    assert [s.queue_wait_hours for s in eval_.sides] == [1.0, 1.0]
    assert_billing_invariants()


def test_the_page_the_csv_and_the_api_tell_the_same_check(client, cast, moved):
    client.force_login(cast.nlp_lead)

    page = client.get("/projects/llm-pretrain/migration/?days=90").content.decode()
    body = client.get("/api/v1/projects/llm-pretrain/migration/?days=90").json()
    rows = list(
        csv.DictReader(
            io.StringIO(b"".join(client.get("/projects/llm-pretrain/migration.csv").streaming_content).decode())
        )
    )

    assert "the eval runs cost 0.62x per run" in page and "2.50x per run" in page
    assert body["compared"] is True
    assert [w["name"] for w in body["workloads"]] == ["eval", "pretrain"]
    assert body["workloads"][0]["sides"][1]["cost_per_run"] == "5.00"
    by = {(r["workload"], r["gpu_model"]): r for r in rows}
    assert (by[("eval", B200)]["runs"], by[("eval", B200)]["cost_per_run"]) == ("3", "5.00")
    assert (by[("all", H100)]["runs"], by[("all", H100)]["cost"]) == ("5", "32.00")
    assert body["workloads"][1]["verdict"] == by[("pretrain", B200)]["verdict"]


def test_a_project_on_one_generation_has_nothing_to_compare_and_the_days_are_checked(client, cast):
    rate(price="2.00")
    ingest(run("only-0", 0, hours=1, sm=50.0, workload="eval", new=False))
    client.force_login(cast.nlp_lead)

    body = client.get("/api/v1/projects/llm-pretrain/migration/").json()
    refused = client.get("/api/v1/projects/llm-pretrain/migration/?days=0")
    unknown = client.get("/api/v1/projects/llm-pretrain/migration/?dayz=30")

    assert body["compared"] is False and "nothing to compare yet" in body["summary"]
    assert refused.status_code == 400 and "days" in str(refused.json())
    assert unknown.status_code == 400 and "dayz" in str(unknown.json())
    assert_billing_invariants()


def test_the_team_month_links_the_projects_that_ran_on_two_generations(client, cast, moved):
    client.force_login(cast.nlp_lead)

    page = client.get("/costs/team/nlp/?month=2026-11").content.decode()

    assert 'href="/projects/llm-pretrain/migration/"' in page
