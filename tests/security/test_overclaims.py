"""Issue 25, items 1 and 2: one record cannot move the bill. Each attack goes through the real ingest path (POST
/api/v1/ingest/ with a collector's token, tasks in-process) and pricing on PostgreSQL; billing is bounded by the
GPUs that exist in every hour (assert_billing_invariants checks it after each)."""

from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db.models import Sum

from governance.api.models import ApiToken
from governance.costs.models import AllocatedHour, Charge, OverClaim
from governance.fleet.models import Gpu
from governance.notify.models import OutboxMessage
from governance.usage.models import IngestBatch, Job
from tests.costs.conftest import cents as to_cents
from tests.costs.conftest import declare
from tests.factories import at, batch_body, committed, ingest, iso, job_record, priced, rate, sample_record
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db

URL = "/api/v1/ingest/"
NINE = at("2026-11-03T09:00:00Z")
DAY = NINE.date()
HOURS = 4  # the world's samples run 09:00 to 13:00


@pytest.fixture(autouse=True)
def _now():
    with time_machine.travel("2026-11-20T12:00:00Z", tick=False):
        yield


def post(client, records: list[dict], token: str):
    with committed():
        response = client.post(
            URL, data=batch_body(records), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )
    priced()
    return response


def samples(cluster: str, gpus: range, job_id: str | None, *, offset_s: int = 0, node_size: int = 16,
            prefix: str = "GPU", hours: int = HOURS) -> list[dict]:  # fmt: skip
    """Samples every 10 minutes from 09:00 for `hours` hours on GPUs `gpus` (16 to a node) held by `job_id`."""
    out = []
    for n in gpus:
        for step in range(hours * 6):
            out.append(sample_record(
                cluster=cluster, node=f"{cluster}-node-{n // node_size}", gpu_uuid=f"{prefix}-{cluster}-{n:04d}",
                gpu_index=n % node_size, ts=iso(NINE + timedelta(seconds=600 * step + offset_s)), job_id=job_id,
                sm_util=80.0 if job_id else 0.0,
            ))  # fmt: skip
    return out


def job(cluster: str, job_id: str, gpus: int, team: str = "vision", project: str = "detector") -> dict:
    return job_record(cluster=cluster, job_id=job_id, gpus=gpus, team=team, project=project,
                      start_time=iso(NINE), end_time=iso(NINE + timedelta(hours=HOURS)), state="completed",
                      submit_time=iso(NINE))  # fmt: skip


def billed(**where) -> dict[str, Decimal]:
    rows = Charge.objects.filter(day=DAY, **where).values("kind", "team_name").annotate(c=Sum("cost"))
    return {f"{r['kind']}:{r['team_name']}": to_cents(r["c"]) for r in rows}


def job_hours(ref: str) -> Decimal:
    return Charge.objects.filter(kind="usage", job_ref=ref).aggregate(h=Sum("gpu_hours"))["h"] or Decimal(0)


@pytest.fixture
def busy_c1(client, cast, ingest_token):
    """c1: 32 GPUs whose collectors report every 10 minutes; Vision's job holds 8 of them, 24 sit free."""
    cast.admin.email = "admin@example.org"
    cast.admin.save(update_fields=["email"])
    rate(price="2.00")
    records = [job("c1", "v-1", 8), *samples("c1", range(8), "v-1"), *samples("c1", range(8, 32), None)]
    assert post(client, records, ingest_token).status_code == 202
    assert_billing_invariants()
    return billed(cluster_name="c1")


def test_it_bills_a_job_declaring_100000_gpus_on_a_32_gpu_cluster_at_most_the_gpus_that_exist(
    client, cast, ingest_token, busy_c1
):
    before = busy_c1
    # The GPUs count from the hour of their first report to the hour after their last: 32 GPUs x 4 hours.
    assert before == {"usage:Vision": to_cents(8 * HOURS * 2), "unallocated:(unallocated)": to_cents(24 * HOURS * 2)}

    response = post(client, [job("c1", "evil", 100_000, team="nlp", project="llm-pretrain")], ingest_token)

    assert response.status_code == 202
    # Every GPU of those hours is seen held by Vision's job or free: the declared count has nothing left to fill.
    assert job_hours("evil") == 0
    after = billed(cluster_name="c1")
    assert after["usage:Vision"] == before["usage:Vision"]
    assert after["unallocated:(unallocated)"] == before["unallocated:(unallocated)"]
    assert after.get("usage:NLP", Decimal(0)) == 0
    assert_billing_invariants()


def test_it_records_the_over_claim_with_its_cluster_day_token_and_jobs_for_admins(client, cast, ingest_token, busy_c1):
    post(client, [job("c1", "evil", 100_000, team="nlp", project="llm-pretrain")], ingest_token)

    (claim,) = OverClaim.objects.all()
    token = ApiToken.objects.get(name="collector")
    assert (claim.cluster.name, claim.day, claim.token_id, claim.token_name) == ("c1", DAY, token.pk, "collector")
    assert claim.overclaimed_gpu_hours == 100_000 * HOURS
    assert [j["job"] for j in claim.jobs] == ["evil"]
    assert Job.objects.get(external_id="evil").source_token_id == token.pk

    client.force_login(cast.admin)
    listed = client.get("/api/v1/overclaims/").json()["results"]
    assert [(r["cluster"], r["day"], r["token"], [j["job"] for j in r["jobs"]]) for r in listed] == [
        ("c1", "2026-11-03", "collector", ["evil"])
    ]
    page = client.get("/admin/costs/overclaim/")
    assert page.status_code == 200 and b"evil" in page.content
    (note,) = OutboxMessage.objects.filter(event="capacity.overclaimed")
    assert note.destination == "mailto://admin@example.org" and "c1" in note.text and "evil" in note.text

    client.force_login(cast.nlp_lead)
    assert client.get("/api/v1/overclaims/").status_code == 403
    assert_billing_invariants()


def test_it_bills_declared_counts_pro_rata_within_declared_capacity_when_no_sample_shows_the_gpus(
    client, cast, ingest_token
):
    rate(price="2.00")
    declare(32, cluster="c2", since="2026-11-01")

    post(client, [job("c2", "v-1", 8), job("c2", "evil", 100_000, team="nlp", project="llm-pretrain")], ingest_token)

    # 32 GPUs for 4 hours are all there is, shared in proportion to the counts declared.
    total = job_hours("v-1") + job_hours("evil")
    assert abs(total - 32 * HOURS) < Decimal("0.0001")
    assert abs(job_hours("v-1") - Decimal(8 * 32 * HOURS) / 100_008) < Decimal("0.0001")
    assert billed(cluster_name="c2").get("unallocated:(unallocated)", Decimal(0)) == to_cents(
        (32 * 24 - 32 * HOURS) * 2
    )
    assert OverClaim.objects.get(cluster__name="c2").overclaimed_gpu_hours > 0

    # The count corrected, the day is priced again and the over-claim is gone.
    post(client, [job("c2", "evil", 8, team="nlp", project="llm-pretrain")], ingest_token)
    assert (job_hours("v-1"), job_hours("evil")) == (8 * HOURS, 8 * HOURS)
    assert not OverClaim.objects.exists()
    assert_billing_invariants()


def test_it_refuses_an_hour_of_samples_on_1000_invented_gpus_and_stores_nothing(client, cast, ingest_token):
    rate(price="2.00")
    records = samples("c1", range(1000), "ghost", hours=1)

    response = post(client, records, ingest_token)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_records"
    assert {d["field"] for d in error["details"]} == {"gpu_uuid"}
    assert "FLEET_MAX_NEW_GPUS_PER_TOKEN_HOUR (64)" in error["details"][0]["reason"]
    assert (IngestBatch.objects.count(), Gpu.objects.count(), Charge.objects.count()) == (0, 0, 0)
    assert_billing_invariants()


def test_it_refuses_samples_naming_more_gpus_on_one_node_than_the_bound(client, cast, ingest_token):
    response = post(client, samples("c1", range(17), "ghost", node_size=100, hours=1), ingest_token)

    assert response.status_code == 400
    details = response.json()["error"]["details"]
    assert [(d["index"], d["field"]) for d in details] == [(16 * 6, "gpu_uuid")]
    assert "FLEET_MAX_GPUS_PER_NODE (16)" in details[0]["reason"]
    assert not Gpu.objects.exists()


def test_it_neither_counts_nor_bills_gpus_beyond_declared_capacity_until_an_admin_confirms_them(
    client, cast, ingest_token
):
    rate(price="2.00")
    declare(32, cluster="c2", since="2026-11-01")
    ingest(samples("c2", range(32), None))  # the cluster's own 32 GPUs, imported by an operator
    # A token invents 40 more GPUs (within its hourly bound) and runs a job of no declared size on them.
    post(client, samples("c2", range(32, 72), "ghost", prefix="NEW"), ingest_token)

    assert Gpu.objects.filter(cluster__name="c2", unconfirmed=True).count() == 40
    assert job_hours("ghost") == 0
    assert billed(cluster_name="c2")["unallocated:(unallocated)"] == to_cents(32 * 24 * 2)
    assert OverClaim.objects.get(cluster__name="c2").overclaimed_gpu_hours == 40 * HOURS

    client.force_login(cast.admin)
    listed = client.get("/api/v1/gpus/", {"cluster": "c2", "unconfirmed": "true", "page_size": 100}).json()
    assert listed["count"] == 40
    one = Gpu.objects.filter(unconfirmed=True).order_by("uuid").first()
    client.force_login(cast.nlp_lead)
    assert client.post(f"/api/v1/gpus/{one.pk}/confirm/").status_code == 403
    client.force_login(cast.admin)
    with committed():
        response = client.post(f"/api/v1/gpus/{one.pk}/confirm/")
    priced()

    assert response.status_code == 200 and response.json()["unconfirmed"] is False
    assert job_hours("ghost") == HOURS  # the confirmed GPU's hours are billed to the job seen on it
    assert_billing_invariants()


def test_it_shares_one_gpu_hour_between_two_jobs_declared_on_the_same_gpus(client, cast, ingest_token):
    rate(price="2.00")
    records = [
        job("east", "a", 8, team="nlp", project="llm-pretrain"), *samples("east", range(8), "a"),
        job("east", "b", 8), *samples("east", range(8), "b", offset_s=300),
    ]  # fmt: skip

    post(client, records, ingest_token)

    assert (job_hours("a"), job_hours("b")) == (4 * HOURS, 4 * HOURS)
    # The 8 GPUs' 4 hours are all there is: nothing is left unallocated, and nothing is billed twice.
    assert billed(cluster_name="east") == {
        "usage:NLP": to_cents(4 * HOURS * 2),
        "usage:Vision": to_cents(4 * HOURS * 2),
    }
    assert not OverClaim.objects.exists()  # sharing is not claiming more than exists
    assert_billing_invariants()


def handed_over(cluster: str, gpus: int | None) -> list[dict]:
    """One GPU sampled every 5 minutes from 09:00 to 13:00: job `a` until 10:20, job `b` from 10:25 (the samples of
    hour 10 are 4 of a's and 7 of b's)."""
    out = []
    for job_id, start, end in (
        ("a", NINE, NINE + timedelta(minutes=80)),
        ("b", NINE + timedelta(minutes=85), NINE + timedelta(hours=HOURS)),
    ):
        out.append(
            job_record(
                cluster=cluster,
                job_id=job_id,
                gpus=gpus,
                team="vision",
                project="detector",
                start_time=iso(start),
                end_time=iso(end),
                state="completed",
                submit_time=iso(NINE),
            )
        )
        moment = start
        while moment < end:
            out.append(
                sample_record(
                    cluster=cluster,
                    node=f"{cluster}-node-0",
                    gpu_uuid=f"GPU-{cluster}-0",
                    gpu_index=0,
                    ts=iso(moment),
                    job_id=job_id,
                    sm_util=80.0,
                )
            )
            moment += timedelta(minutes=5)
    return out  # fmt: skip


@pytest.mark.parametrize("gpus", [1, None], ids=["declared", "seen-only"])
def test_a_gpu_handed_from_one_job_to_the_next_within_an_hour_bills_each_its_time_and_claims_nothing_more(
    client, cast, ingest_token, gpus
):
    rate(price="2.00")

    post(client, handed_over("east", gpus), ingest_token)

    # a held the GPU 09:00-10:20, b 10:25-13:00: each is billed its own time, priced a job-day at a time.
    assert (job_hours("a"), job_hours("b")) == (Decimal("1.333333"), Decimal("2.583333"))
    assert billed(cluster_name="east")["unallocated:(unallocated)"] == to_cents(Decimal(5) / 60 * 2)
    assert not OverClaim.objects.exists()
    assert not AllocatedHour.objects.exists()  # the day was not contended
    assert_billing_invariants()


def test_an_over_claim_under_the_notify_threshold_is_recorded_and_listed_but_not_announced(
    client, cast, ingest_token, busy_c1, settings
):
    settings.GOVERNANCE_OVERCLAIM_NOTIFY_GPU_HOURS = Decimal(100_000 * HOURS)

    post(client, [job("c1", "evil", 100_000, team="nlp", project="llm-pretrain")], ingest_token)

    assert OverClaim.objects.get().overclaimed_gpu_hours == 100_000 * HOURS
    assert not OutboxMessage.objects.filter(event="capacity.overclaimed").exists()
    assert_billing_invariants()
