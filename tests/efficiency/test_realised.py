"""Realised savings: a recurring workload fixed halfway; its runs after the resolution against those before."""

from datetime import timedelta
from decimal import Decimal

import time_machine

from governance.efficiency.models import Finding
from governance.efficiency.services import finding_resolve, findings_evaluate_all
from governance.efficiency.workloads import realised_savings, realised_savings_of
from tests.efficiency.conftest import START, a_job, gpu
from tests.efficiency.test_savings import busy_then_idle
from tests.factories import at, ingest, iso, rate
from tests.invariants import assert_billing_invariants

EVAL = {"name": "nightly-eval"}


def busy_only(job_id: str, day: int) -> list[dict]:
    """The fixed run: 1 h at 90% SM and the job ends (2.00 USD at 2.00)."""
    start = START + timedelta(days=day)
    record = a_job(minutes=60, job_id=job_id, start_time=iso(start), submit_time=iso(start),
                   end_time=iso(start + timedelta(minutes=60)), labels=EVAL)  # fmt: skip
    return [record, *gpu(minutes=60, offset=day * 24 * 60, job_id=job_id, sm_util=90.0)]


def fixed_halfway(cast, runs_after: int) -> Finding:
    rate(price="2.00")
    for day in range(3):
        ingest(busy_then_idle(f"eval-{day}", day, labels=EVAL))
    findings_evaluate_all(now=at("2026-11-06T00:00:00Z"))
    finding = Finding.objects.get(rule="idle_gpu", job__external_id="eval-2")
    with time_machine.travel(at("2026-11-06T00:00:00Z"), tick=False):
        finding_resolve(finding_id=finding.pk, user=cast.nlp_lead, reason="the job exits after the eval")
    for day in range(4, 4 + runs_after):
        ingest(busy_only(f"eval-{day}", day))
    findings_evaluate_all(now=at("2026-11-12T00:00:00Z"))
    finding.refresh_from_db()
    return finding


def test_the_job_page_tells_what_taking_the_advice_saved_per_run_and_so_far(client, cast):
    finding = fixed_halfway(cast, runs_after=3)

    client.force_login(cast.nlp_lead)
    page = client.get(f"/jobs/{finding.job_id}/").content.decode()

    assert finding.state == "resolved"
    assert "Since it was resolved on 2026-11-06: 3 runs after against 3 before" in page
    assert "1.0 against 4.0 GPU-hours per run, SM 90% against" in page
    assert "2.00 USD against 8.00 USD per run: 6.00 USD saved per run, 18.00 USD so far." in page
    assert_billing_invariants()


def test_with_one_run_after_it_says_there_are_not_enough_runs_yet(client, cast):
    finding = fixed_halfway(cast, runs_after=1)

    client.force_login(cast.nlp_lead)
    page = client.get(f"/jobs/{finding.job_id}/").content.decode()

    assert "not enough runs yet to tell what it saved (3 before, 1 after; 2 needed on each side)" in page
    assert "saved per run" not in page


def test_the_api_gives_the_runs_before_and_after_and_what_was_saved(client, cast):
    finding = fixed_halfway(cast, runs_after=3)
    client.force_login(cast.nlp_lead)

    body = client.get(f"/api/v1/findings/{finding.pk}/realised/").json()

    assert body["enough_runs"] is True
    assert (body["before"]["runs"], body["after"]["runs"]) == (3, 3)
    assert (body["before"]["cost_per_run"], body["after"]["cost_per_run"]) == ("8.00", "2.00")
    assert (body["saved_per_run"], body["saved"], body["currency"]) == ("6.00", "18.00", "USD")


def test_an_open_finding_has_nothing_realised_and_another_teams_is_not_found(client, cast):
    rate(price="2.00")
    ingest(busy_then_idle("eval-0", 0, labels=EVAL))
    findings_evaluate_all(now=at("2026-11-06T00:00:00Z"))
    finding = Finding.objects.get(rule="idle_gpu")

    client.force_login(cast.nlp_lead)
    body = client.get(f"/api/v1/findings/{finding.pk}/realised/").json()
    client.force_login(cast.vision_lead)
    hidden = client.get(f"/api/v1/findings/{finding.pk}/realised/")

    assert body["enough_runs"] is False and body["saved"] is None and body["text"].startswith("Not measured")
    assert hidden.status_code == 404
    assert Decimal(body["finding_id"]) == finding.pk


def test_the_team_month_and_the_api_tell_the_advice_taken_and_what_it_saved(client, cast):
    fixed_halfway(cast, runs_after=3)
    client.force_login(cast.nlp_lead)

    page = client.get("/costs/team/nlp/?month=2026-11").content.decode()
    body = client.get("/api/v1/teams/nlp/advice-taken/?month=2026-11").json()
    october = client.get("/api/v1/teams/nlp/advice-taken/?month=2026-10").json()
    client.force_login(cast.alice)
    engineer = client.get("/api/v1/teams/nlp/advice-taken/?month=2026-11")

    said = "Advice taken this month: 1 finding resolved; 1 measured on the runs since, saving 18.00 USD so far."
    assert said in page
    assert (body["resolved"], body["measured"], body["saved"], body["text"]) == (1, 1, "18.00", said)
    assert body["findings"][0]["rule"] == "idle_gpu" and body["findings"][0]["saved"] == "18.00"
    assert (october["resolved"], october["saved"]) == (0, "0.00")
    assert engineer.status_code == 404
    assert_billing_invariants()


def test_a_finding_on_recurring_work_tells_its_workload_in_the_api(client, cast):
    finding = fixed_halfway(cast, runs_after=3)
    client.force_login(cast.nlp_lead)

    body = client.get(f"/api/v1/findings/{finding.pk}/workload/").json()

    assert (body["recurring"], body["labelled_by"], body["name"], body["runs"]) == (True, "name", "nightly-eval", 6)
    assert body["text"].startswith("The nightly-eval runs of ")
    assert Decimal(body["savings"]) <= Decimal(body["cost"])


def test_many_findings_are_measured_in_two_queries_with_the_figures_each_gives_alone(cast, django_assert_num_queries):
    finding = fixed_halfway(cast, runs_after=3)
    other = {"name": "nightly-train"}  # the same user and project, another workload: none of its runs is counted
    start = START + timedelta(days=8)
    ingest([a_job(minutes=60, job_id="train-8", start_time=iso(start), submit_time=iso(start),
                  end_time=iso(start + timedelta(minutes=60)), labels=other),
            *gpu(minutes=60, offset=8 * 24 * 60, job_id="train-8", sm_util=90.0)])  # fmt: skip
    earlier = Finding.objects.filter(rule="idle_gpu", job__external_id__in=["eval-0", "eval-1"])
    for day, f in zip((4, 5), earlier.order_by("job__external_id"), strict=True):
        with time_machine.travel(at(f"2026-11-0{day}T00:00:00Z"), tick=False):
            finding_resolve(finding_id=f.pk, user=cast.nlp_lead, reason="fixed")
    findings = list(Finding.objects.filter(state=Finding.State.RESOLVED).select_related("job").order_by("pk"))
    alone = {f.pk: realised_savings(finding=f) for f in findings}

    with django_assert_num_queries(2):
        together = realised_savings_of(findings)

    assert len(findings) == 3 and finding.pk in together
    assert together == alone
    # Each resolved a day earlier: one run of the workload fewer before it and one more after (train-8 in neither).
    runs = {f.job.external_id: (together[f.pk].before.runs, together[f.pk].after.runs) for f in findings}
    assert runs == {"eval-2": (3, 3), "eval-1": (2, 4), "eval-0": (1, 5)}
    assert_billing_invariants()
