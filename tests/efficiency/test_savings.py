"""Savings are measured over the trailing 30 days from the job's ledger rows, partitioned like waste; a recurring
workload's runs are added up beside the finding."""

from datetime import date, timedelta
from decimal import Decimal

from governance.efficiency.models import Finding
from governance.efficiency.services import findings_evaluate, findings_evaluate_all, findings_savings_refresh
from governance.efficiency.waste import DayBill, savings_allocate, savings_window_start
from governance.efficiency.workloads import workload_key
from governance.usage.models import Job
from tests.efficiency.conftest import START, a_job, gpu
from tests.factories import at, ingest, iso, rate
from tests.invariants import assert_billing_invariants, assert_savings_within_spend

D1, D2 = date(2026, 11, 3), date(2026, 11, 4)


def test_it_counts_only_the_days_of_the_trailing_30_day_window():
    bills = {D1: DayBill(Decimal(10), Decimal(20)), D2: DayBill(Decimal(10), Decimal(30))}
    claims = {"idle_gpu": {D1: 4.0, D2: 4.0}, "low_utilization": {D1: 6.0, D2: 6.0}}

    saved = savings_allocate(claims, bills, since=D2)

    assert saved["idle_gpu"].money == Decimal("12.00")  # 4 h of the second day at 3.00; the first is outside
    assert saved["low_utilization"].money == Decimal("6.00")  # the 2 h beyond idle_gpu's, counted once


def test_the_window_is_30_days_ending_with_the_day_of_the_evaluation():
    assert savings_window_start(at("2026-12-01T00:30:00Z")) == date(2026, 11, 2)


def test_it_names_a_recurring_workload_by_its_workload_name_or_kind_label():
    assert workload_key({"kind": "eval", "name": "nightly-eval"}) == ("name", "nightly-eval")
    assert workload_key({"workload": "bench", "name": "x"}) == ("workload", "bench")
    assert workload_key({"partition": "gpu"}) is None


def busy_then_idle(job_id: str, day: int, **job: object) -> list[dict]:
    """A one-GPU job on day `day` after START: 1 h at 90% SM, then 3 h idle (6.00 USD of 8.00 at 2.00)."""
    offset = day * 24 * 60
    start = START + timedelta(minutes=offset)
    record = a_job(minutes=240, job_id=job_id, start_time=iso(start), submit_time=iso(start),
                   end_time=iso(start + timedelta(minutes=240)), **job)  # fmt: skip
    return [record, *gpu(minutes=240, offset=offset, job_id=job_id, sm_util=lambda s: 90.0 if s < 3600 else 0.0)]


def test_an_ended_job_saves_what_its_idle_hours_cost_and_nothing_once_it_is_older_than_30_days(cast):
    rate(price="2.00")
    ingest(busy_then_idle("4242", 0))

    findings_evaluate_all(now=at("2026-11-10T00:00:00Z"))
    idle = Finding.objects.get(rule="idle_gpu")
    assert (idle.waste, idle.savings, idle.savings_from) == (Decimal("6.00"), Decimal("6.00"), date(2026, 10, 12))

    findings_evaluate_all(now=at("2026-12-10T00:00:00Z"))
    idle.refresh_from_db()
    assert (idle.waste, idle.savings) == (Decimal("6.00"), Decimal("0.00"))  # still wasted, no longer a saving to win
    assert_savings_within_spend()
    assert_billing_invariants()


def test_a_one_gpu_job_saves_at_most_its_bill_however_many_findings_it_has(cast):
    rate(price="2.00")
    low = [a_job(minutes=240), *gpu(minutes=240, sm_util=5.0, mem_used_mib=4 * 1024.0)]
    ingest(low)

    findings_evaluate_all(now=at("2026-11-10T00:00:00Z"))

    found = {f.rule: f.savings for f in Finding.objects.all()}
    assert {"mig_fit", "low_utilization"} <= set(found)
    assert sum(found.values()) <= Decimal("8.00")  # 4 h at 2.00: every GPU-hour's saving counted once
    assert found["mig_fit"] == Decimal("6.86")  # a 1g.10gb slice frees 6/7 of the 4 h
    assert_billing_invariants()


def test_a_running_jobs_saving_says_so_far_on_its_page(client, cast):
    rate(price="2.00")
    records = busy_then_idle("4242", 0)
    records[0] = {**records[0], "end_time": None, "state": "running"}
    ingest(records)
    findings_evaluate_all(now=at("2026-11-03T13:30:00Z"))
    job = Finding.objects.get(rule="idle_gpu").job

    client.force_login(cast.alice)
    page = client.get(f"/jobs/{job.pk}/").content.decode()

    assert "advice would have saved 6.00 USD so far" in page
    assert 'id="job-idle-strip"' in page and "Idle hours (mean SM under 1%)" in page
    assert "/month" not in page


def test_the_job_page_adds_up_the_runs_of_a_recurring_workload(client, cast):
    rate(price="2.00")
    for day in range(3):
        ingest(busy_then_idle(f"eval-{day}", day, labels={"name": "nightly-eval"}))
    ingest(busy_then_idle("other", 3, labels={"name": "pretrain"}))
    findings_evaluate_all(now=at("2026-11-10T00:00:00Z"))
    last = Finding.objects.get(rule="idle_gpu", job__external_id="eval-2")

    client.force_login(cast.alice)
    page = client.get(f"/jobs/{last.job_id}/").content.decode()

    assert last.savings == Decimal("6.00")  # its own run's share; the workload's figure is told beside it
    assert "The nightly-eval runs of LLM pretraining (3 since 2026-10-12) cost 24.00 USD" in page
    assert "would have saved 18.00 USD of it (75%)" in page
    assert_billing_invariants()


def test_the_daily_refresh_moves_the_window_over_ended_jobs(cast):
    rate(price="2.00")
    ingest(busy_then_idle("short", 0))  # 2026-11-03, 3 idle hours
    long = a_job(minutes=3 * 24 * 60, job_id="long", end_time=iso(START + timedelta(days=3)))
    ingest([long, *gpu(minutes=3 * 24 * 60, job_id="long", uuid="GPU-2", sm_util=lambda s: 90.0 if s < 3600 else 0.0)])
    findings_evaluate_all(now=at("2026-11-10T00:00:00Z"))
    saved = dict(Finding.objects.filter(rule="idle_gpu").values_list("job__external_id", "savings"))
    assert saved == {"short": Decimal("6.00"), "long": Decimal("142.00")}  # 71 idle hours from 11-03 10:00

    findings_savings_refresh(now=at("2026-12-04T12:00:00Z"))  # the window now starts on 2026-11-05

    saved = dict(Finding.objects.filter(rule="idle_gpu").values_list("job__external_id", "savings"))
    assert saved == {"short": Decimal("0.00"), "long": Decimal("66.00")}  # 24 h on 11-05 and 9 h on 11-06
    assert Finding.objects.get(rule="idle_gpu", job__external_id="short").waste == Decimal("6.00")
    assert_billing_invariants()


def test_a_workload_adds_up_runs_evaluated_on_different_days(client, cast):
    rate(price="2.00")
    for day in range(3):
        ingest(busy_then_idle(f"eval-{day}", day, labels={"name": "nightly-eval"}))
        job = Job.objects.get(external_id=f"eval-{day}")
        findings_evaluate(job_ids=[job.pk], now=at("2026-11-04T00:00:00Z") + timedelta(days=day), final=True)
    last = Finding.objects.get(rule="idle_gpu", job__external_id="eval-2")

    client.force_login(cast.alice)
    page = client.get(f"/jobs/{last.job_id}/").content.decode()

    assert "(3 since 2026-10-08) cost 24.00 USD" in page and "would have saved 18.00 USD of it (75%)" in page
