"""Issue 25, items 3 and 4: one bad value never stops pricing, and no GPU-hour is silently free.

Replayed through the real ingest path and pricing on PostgreSQL; the billing invariants hold after each.
"""

from decimal import Decimal

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse

from collectors.mig import mig_extra_parse
from governance.api.models import AuditEntry
from governance.costs.models import Charge, MonthClose, PricingFailure
from governance.costs.selectors import reconcile
from governance.costs.services import statement_close
from governance.costs.tasks import reprice_running
from governance.fleet.models import Gpu
from governance.lib.months import Month
from governance.org.models import User
from governance.usage.models import IngestBatch, Sample
from tests.costs.conftest import declare
from tests.factories import at, batch_body, committed, ingest, job_record, rate, sample_record, series
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db

NOVEMBER = Month(2026, 11)
START = at("2026-11-03T09:15:00Z")
B200 = "NVIDIA B200"


@pytest.fixture(autouse=True)
def _now():
    """Early December 2026: November has ended (it may close) and its records are inside the ingest window."""
    with time_machine.travel("2026-12-02T12:00:00Z", tick=False):
        yield


def post(client, records: list[dict], token: str):
    with committed():
        return client.post("/api/v1/ingest/", data=batch_body(records), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")  # fmt: skip


def on_gpus(job_id: str, gpus: int, **fields) -> list[dict]:
    """Samples of a job on `gpus` GPUs from START, every 10 minutes for 110 minutes: the fleet knows its GPUs."""
    out = []
    for index in range(gpus):
        gpu = {"gpu_uuid": f"GPU-{job_id}-{index}", "gpu_index": index}
        out.extend(series(start=START, minutes=110, every_s=600, job_id=job_id, **gpu, **fields))
    return out


def sevenths(hours: str) -> Decimal:
    return (Decimal(hours) / 7).quantize(Decimal("0.000001"))


def job_hours(ref: str) -> Decimal:
    rows = Charge.objects.filter(kind="usage", job__external_id=ref)
    return sum(rows.values_list("gpu_hours", flat=True), Decimal(0))


# --- 3. MIG profiles are checked at the edge ---------------------------------------------------------------------


def test_an_unknown_mig_profile_is_refused_with_400_naming_the_record_field_and_profile(client, cast, ingest_token):
    records = [job_record(), sample_record(), sample_record(gpu_uuid="MIG-1", mig_profile="zz", mem_total_mib=9728.0,
                                                            mem_used_mib=100.0)]  # fmt: skip

    response = post(client, records, ingest_token)

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_records"
    assert [(d["index"], d["field"]) for d in error["details"]] == [(2, "mig_profile")]
    assert "'zz'" in error["details"][0]["reason"] and "NVIDIA H100 80GB HBM3" in error["details"][0]["reason"]
    assert (IngestBatch.objects.count(), Sample.objects.count()) == (0, 0)
    assert_billing_invariants()


def test_a_profile_of_another_gpu_is_refused_and_one_the_setting_adds_is_accepted(client, cast, ingest_token, settings):
    rate()
    a100_profile = [job_record(), sample_record(gpu_uuid="MIG-1", mig_profile="1g.5gb", mem_total_mib=4864.0,
                                                mem_used_mib=100.0)]  # fmt: skip
    assert post(client, a100_profile, ingest_token).status_code == 400

    settings.MIG_EXTRA_PROFILES = mig_extra_parse("1g.5gb=1/7:5")

    assert post(client, a100_profile, ingest_token).status_code == 202
    assert Gpu.objects.get(uuid="MIG-1").mig_profile == "1g.5gb"
    assert_billing_invariants()


# --- 3. A poison job-day is isolated, listed and retried ------------------------------------------------------


def test_a_poison_job_day_is_isolated_listed_and_cleared_after_a_fix(client, cast):
    rate()
    declare(16)  # the samples stop at 10:55 and the jobs at 11:12: c1 declares what it has
    ended = {"end_time": "2026-11-03T11:12:00Z", "state": "completed"}
    ingest([job_record(job_id="poison", gpus=1, **ended),
            *series(start=START, minutes=110, every_s=600, job_id="poison", gpu_uuid="MIG-poison",
                    mig_profile="1g.10gb", mem_total_mib=9728.0, mem_used_mib=1000.0)])  # fmt: skip
    assert job_hours("poison") == sevenths("2")  # 2 hours on a seventh of an H100
    # A value that got past the edge before it checked profiles: an old row holding a profile nobody knows.
    Gpu.objects.filter(uuid="MIG-poison").update(mig_profile="zz")
    # The same cluster-day: the sound 8-GPU job, and a later record of the poison job that re-prices its day.
    ingest([job_record(job_id="sound", gpus=8, **ended), *on_gpus("sound", 8),
            job_record(job_id="poison", gpus=1, end_time="2026-11-03T11:00:00Z", state="completed")])  # fmt: skip

    assert job_hours("sound") == Decimal(16)
    assert Charge.objects.filter(kind="usage", job__external_id="sound").count() == 1
    failure = PricingFailure.objects.get()
    assert (failure.job.external_id, str(failure.day), failure.attempts) == ("poison", "2026-11-03", 1)
    assert "UnknownMigProfile" in failure.error and "'zz'" in failure.error
    assert job_hours("poison") == sevenths("2")  # its last good price stands until a retry succeeds
    assert_billing_invariants()

    client.force_login(cast.admin)
    listed = client.get("/api/v1/pricing-failures/").json()["results"]
    assert [(f["cluster"], f["job"], f["day"], f["attempts"]) for f in listed] == [("c1", "poison", "2026-11-03", 1)]
    assert "'zz'" in listed[0]["error"]
    root = User.objects.create_superuser("root", password="pw-root-1234")
    client.force_login(root)
    admin_page = client.get("/admin/costs/pricingfailure/")
    assert admin_page.status_code == 200 and "UnknownMigProfile" in admin_page.content.decode()
    client.force_login(cast.finance)
    assert client.get("/api/v1/pricing-failures/").status_code == 403

    with committed():
        reprice_running()  # the periodic pass retries it: still broken, one more attempt
    assert PricingFailure.objects.get().attempts == 2

    Gpu.objects.filter(uuid="MIG-poison").update(mig_profile="1g.10gb")  # the fix
    client.force_login(root)
    with committed():  # the admin retries it now rather than wait for the periodic pass
        client.post("/admin/costs/pricingfailure/", {"action": "retry", "_selected_action": [failure.pk]})

    assert not PricingFailure.objects.exists()
    assert job_hours("poison") == sevenths("1.8")
    assert job_hours("sound") == Decimal(16)
    assert_billing_invariants()


def test_an_exception_in_one_job_days_arithmetic_leaves_the_rest_of_the_pass_priced(cast, monkeypatch):
    from governance.costs import reprice

    rate()
    real = reprice.job_day_rows

    def broken_for_one(job, day, *args, **kwargs):
        if (job.ref, str(day)) == ("poison", "2026-11-03"):
            raise ArithmeticError("division by zero in one job's arithmetic")
        return real(job, day, *args, **kwargs)

    monkeypatch.setattr(reprice, "job_day_rows", broken_for_one)
    declare(16)  # the samples stop at 10:55 and the jobs at 11:12: c1 declares what it has
    ended = {"end_time": "2026-11-03T11:12:00Z", "state": "completed"}
    ingest([job_record(job_id="poison", gpus=1, **ended), *on_gpus("poison", 1),
            job_record(job_id="sound", gpus=8, **ended), *on_gpus("sound", 8)])  # fmt: skip

    assert job_hours("sound") == Decimal(16)
    assert job_hours("poison") == 0
    assert PricingFailure.objects.get().error == "ArithmeticError: division by zero in one job's arithmetic"
    assert_billing_invariants()


# --- 4. No GPU-hour is silently free --------------------------------------------------------------------------


def unpriced_b200() -> None:
    """An H100 rate card only, and a two-GPU B200 job of two hours on c1: 4 GPU-hours no card prices."""
    rate()
    declare(2, model=B200)  # the samples stop at 10:55 and the job at 11:12: c1 declares its B200s
    ingest([job_record(job_id="b200", gpus=2, gpu_model=B200, end_time="2026-11-03T11:12:00Z", state="completed"),
            *on_gpus("b200", 2, gpu_model=B200)])  # fmt: skip


def test_unpriced_usage_blocks_the_close_and_reconcile_names_it(client, cast):
    unpriced_b200()

    problems = reconcile(month=NOVEMBER).problems
    assert [p for p in problems if "no rate card" in p] == [
        "c1: 4.00 GPU-hours of NVIDIA B200 have no rate card (unpriced, billed 0); add a rate card for the model"
        " (or a '*' card), or accept it when closing the month"
    ]
    with pytest.raises(CommandError, match=r"c1: 4\.00 GPU-hours of NVIDIA B200 have no rate card"):
        call_command("reconcile", "2026-11")
    with pytest.raises(CommandError, match=r"NVIDIA B200 4\.00 GPU-hours"):
        call_command("close_month", "2026-11")
    with pytest.raises(ValidationError) as refused:
        statement_close(month=NOVEMBER)
    assert refused.value.code == "unpriced"

    client.force_login(cast.finance)
    response = client.post("/api/v1/months/2026-11/close/", {}, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unpriced"
    assert "c1 NVIDIA B200 4.00 GPU-hours" in response.json()["error"]["message"]
    assert not MonthClose.objects.exists()

    page = client.get("/costs/", {"month": "2026-11"}).content.decode()
    assert "Unpriced usage" in page and "NVIDIA B200" in page
    worklist = client.get("/api/v1/unattributed/", {"month": "2026-11"}).json()
    assert worklist["unpriced"] == [{"cluster": "c1", "gpu_model": B200, "gpu_hours": "4.00"}]
    assert "NVIDIA B200" in client.get("/costs/unattributed/", {"month": "2026-11"}).content.decode()

    rate(model=B200, price="5.00")  # a card exists: the hours are priced and the month closes
    response = client.post("/api/v1/months/2026-11/close/", {}, content_type="application/json")
    assert response.status_code == 201, response.content
    assert MonthClose.objects.get().unpriced_accepted == []
    assert job_hours("b200") == 4 and Charge.objects.get(job__external_id="b200").cost == Decimal(20)
    assert_billing_invariants()


def test_finance_accepting_unpriced_usage_is_on_record_and_the_close_then_succeeds(client, cast):
    unpriced_b200()
    client.force_login(cast.finance)

    response = client.post("/api/v1/months/2026-11/close/", {"accept_unpriced": True}, content_type="application/json")

    assert response.status_code == 201, response.content
    accepted = [{"cluster": "c1", "gpu_model": B200, "gpu_hours": "4.00"}]
    assert response.json()["unpriced_accepted"] == accepted
    assert MonthClose.objects.get().unpriced_accepted == accepted
    entry = AuditEntry.objects.get(action="close", changes__has_key="unpriced_accepted")
    assert (entry.actor, entry.model, entry.changes["unpriced_accepted"]) == (cast.finance, "costs.monthclose",
                                                                              [None, accepted])  # fmt: skip
    assert reconcile(month=NOVEMBER).ok
    assert_billing_invariants()


def test_the_close_page_refuses_unpriced_usage_until_finance_ticks_the_acceptance(client, cast):
    unpriced_b200()
    client.force_login(cast.finance)
    url = reverse("costs:close", args=["2026-11"])
    assert 'id="accept-unpriced"' in client.get(url).content.decode()

    refused = client.post(url, follow=True).content.decode()
    assert "cannot close" in refused and "NVIDIA B200" in refused
    assert not MonthClose.objects.exists()

    client.post(url, {"accept_unpriced": "1"})

    assert MonthClose.objects.get().unpriced_accepted == [{"cluster": "c1", "gpu_model": B200, "gpu_hours": "4.00"}]
    assert AuditEntry.objects.filter(actor=cast.finance, changes__has_key="unpriced_accepted").exists()
    assert_billing_invariants()
