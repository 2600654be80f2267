"""Issue 33: shared GPUs billed by share. A kubelet's time-sliced replica ids through the agent to the bill, and a
month of Alibaba's openb trace (pods on a share of one GPU) priced by share; billing invariants on each."""

import csv
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import time_machine
from django.db.models import Sum

from collectors.agent import Agent
from collectors.podresources import PodResources
from collectors.pods import KubernetesPods
from collectors.sources.dcgm import DcgmSource
from governance.costs.models import Charge
from governance.costs.services import statement_close
from governance.efficiency.models import Finding
from governance.efficiency.services import findings_evaluate_all
from governance.lib.months import Month
from governance.usage.models import Job
from tests.collectors.servers import kubelet_served, pages_served
from tests.collectors.test_dcgm import EKS, page
from tests.costs.conftest import cents, declare, set_rate
from tests.factories import at, committed, ingest, job_record, series
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db

H100 = "NVIDIA H100 80GB HBM3"
NINE = datetime(2026, 11, 3, 9, tzinfo=UTC)
GPU1 = "GPU-bc5610b9-79c8-fedd-8899-07539c7f868a"  # one of the page's 8 GPUs; dcgm names a pod on GPU 0 only


def hours(**where) -> Decimal:
    return Charge.objects.filter(kind="usage", **where).aggregate(h=Sum("gpu_hours"))["h"] or Decimal(0)


NOV3 = {"submit_time": "2026-11-03T00:00:00Z", "start_time": "2026-11-03T00:00:00Z", "state": "completed"}


def test_the_team_month_says_what_it_spent_on_shared_gpus_on_the_page_and_in_the_api(client, cast):
    set_rate(H100, "2.00")
    declare(2)
    with time_machine.travel("2026-11-04T00:00:00Z", tick=False):
        ingest([
            job_record(job_id="whole", **NOV3, end_time="2026-11-03T03:00:00Z"),
            job_record(job_id="pod-a", **NOV3, end_time="2026-11-03T04:00:00Z", gpus=0.25),
            job_record(job_id="pod-b", **NOV3, end_time="2026-11-03T02:00:00Z", gpus=0.5),
        ])  # fmt: skip
        assert_billing_invariants()
        client.force_login(cast.nlp_lead)

        page = client.get("/costs/team/nlp/", {"month": "2026-11"})
        api = client.get("/api/v1/chargeback/", {"month": "2026-11", "team": "nlp"}).json()
        pod = client.get(f"/jobs/{Job.objects.get(external_id='pod-a').pk}/").content.decode()
        whole = client.get(f"/jobs/{Job.objects.get(external_id='whole').pk}/").content.decode()

    # 3 h of a whole GPU (6.00) and two shares: 4 h x 0.25 + 2 h x 0.5 = 2 GPU-hours of share (4.00).
    assert (page.context["b"].cost, page.context["b"].shared_gpu_cost) == (Decimal(10), Decimal(4))
    assert "4.00 USD (40.0% of the cost), 2.0 GPU-hours of share" in page.content.decode()
    assert [(r["cost"], r["shared_gpu_cost"]) for r in api] == [("10.00", "4.00")]
    # The job page of a pod on a share says what its utilisation is read from; a whole-GPU job's says nothing.
    assert 'id="job-shared-gpu">This job holds a share of one GPU (0.25 of it)' in pod
    assert "job-shared-gpu" not in whole

    with time_machine.travel("2026-12-02T10:00:00Z", tick=False), committed():
        statement_close(month=Month(2026, 11))
    with time_machine.travel("2026-12-02T11:00:00Z", tick=False):
        client.force_login(cast.nlp_lead)  # the November session has expired
        closed = client.get("/api/v1/chargeback/", {"month": "2026-11", "team": "nlp"}).json()
        assert [(r["cost"], r["shared_gpu_cost"], r["closed"]) for r in closed] == [("10.00", "4.00", True)]
        assert_billing_invariants()


@time_machine.travel("2026-11-04T00:00:00Z", tick=False)
def test_an_idle_pods_waste_is_its_shares_idle_hours_not_the_whole_gpus(cast):
    set_rate(H100, "2.00")
    declare(1)
    # A quarter of a GPU for 4 hours (2.00), idle for the first 2 and busy after: half its bill is wasted.
    ingest([
        job_record(job_id="pod-a", **NOV3, end_time="2026-11-03T04:00:00Z", gpus=0.25),
        *series(start=at("2026-11-03T00:00:00Z"), minutes=240, every_s=300, job_id="pod-a",
                sm_util=lambda s: 0.0 if s < 7200 else 80.0),
    ])  # fmt: skip
    findings_evaluate_all(now=at("2026-11-04T00:00:00Z"))

    idle = Finding.objects.get(rule="idle_gpu", job__external_id="pod-a")
    assert Charge.objects.get(job_ref="pod-a").cost == Decimal(2)
    # Its 2 idle hours of the share (held hours, as a MIG slice's), priced at a quarter of the rate: 1.00, not 2.00.
    assert (idle.wasted_gpu_hours, cents(idle.waste)) == (Decimal(2), Decimal("1.00"))
    assert_billing_invariants()


@time_machine.travel("2026-11-04T00:00:00Z", tick=False)
def test_a_pod_using_a_tenth_of_its_half_gpu_is_told_a_smaller_share_and_its_waste_stays_within_its_bill(cast):
    set_rate(H100, "2.00")
    declare(1)
    ingest([
        job_record(job_id="pod-a", **NOV3, end_time="2026-11-03T04:00:00Z", gpus=0.5),
        *series(start=at("2026-11-03T00:00:00Z"), minutes=240, every_s=300, job_id="pod-a", sm_util=5.0),
    ])  # fmt: skip
    findings_evaluate_all(now=at("2026-11-04T00:00:00Z"))

    findings = {f.rule: f for f in Finding.objects.filter(job__external_id="pod-a")}
    # 4 h x 0.5 x 2.00 = 4.00; a 0.10 share would have cost a fifth: 3.20 wasted, the rest to low utilisation.
    assert "request 0.10 of a GPU, or pack 10 pods per GPU instead of 2" in findings["share_oversized"].advice
    assert cents(findings["share_oversized"].waste) == Decimal("3.20")
    assert sum(f.waste for f in findings.values()) <= Decimal(4)
    assert_billing_invariants()


def test_two_pods_on_one_replica_each_of_a_gpu_sliced_in_4_are_billed_a_quarter_each_and_half_is_unallocated(
    tmp_path, cast
):
    minutes = iter(range(10_000))
    with kubelet_served(tmp_path) as (kubelet, socket), pages_served({"/metrics": page(EKS)}) as url:
        kubelet.allocatable = {"nvidia.com/gpu": [f"{GPU1}::{n}" for n in range(4)]}
        kubelet.pods = [
            ("ml", "a", {"nvidia.com/gpu": [f"{GPU1}::0"]}),
            ("ml", "b", {"nvidia.com/gpu": [f"{GPU1}::2"]}),
        ]
        out = tmp_path / "batches.jsonl"
        with out.open("wb") as sink:
            agent = Agent(source=DcgmSource(cluster="eks", node="n1", url=f"{url}/metrics", timeout=5), collector="t",
                          jobs=KubernetesPods(cluster="eks", pod_resources=PodResources(socket)).describe,
                          dry_run=sink, now=lambda: NINE + timedelta(minutes=next(minutes)))  # fmt: skip
            for _ in range(60):  # an hour of rounds, a minute apart
                agent.sample()
    records = [r for line in out.read_text().splitlines() for r in json.loads(line)["records"]]
    set_rate(H100, "2.00")

    with time_machine.travel(NINE + timedelta(hours=1), tick=False):
        ingest(records)

        assert (hours(job_ref="ml/a"), hours(job_ref="ml/b")) == (Decimal("0.25"), Decimal("0.25"))
        assert Charge.objects.get(kind="usage", job_ref="ml/a").cost == Decimal("0.5")
        # 8 GPUs for the hour: the pod dcgm names holds GPU 0, the two pods half of GPU1; the rest is unallocated.
        assert hours(cluster_name="eks") == Decimal("1.5")
        unallocated = Charge.objects.filter(kind="unallocated", cluster_name="eks").aggregate(h=Sum("gpu_hours"))
        assert unallocated["h"] == Decimal("6.5")
        assert_billing_invariants()


OPENB = Path(__file__).resolve().parents[3] / "shared" / "data" / "traces" / "alibaba-openb-2023"
ORIGIN = datetime(2026, 3, 3, tzinfo=UTC)  # the trace's second 0: its busiest month falls on July 2026
JULY = (datetime(2026, 7, 1, tzinfo=UTC), datetime(2026, 8, 1, tzinfo=UTC))
MODEL = "openb GPU"
TEAMS = {"LS": "nlp", "Guaranteed": "nlp", "BE": "vision", "Burstable": "vision"}


def openb_pods() -> list[dict]:
    """The sample's GPU pods that ran in July, each with its GPUs: gpu_milli / 1000 of one GPU, else num_gpu."""
    pods = []
    with (OPENB / "openb_pods_sample.csv").open() as f:
        for row in csv.DictReader(f):
            n, milli = int(row["num_gpu"]), int(row["gpu_milli"] or 0)
            if n == 0 or not row["scheduled_time"] or (n == 1 and milli == 0):
                continue
            start = ORIGIN + timedelta(seconds=float(row["scheduled_time"]))
            end = ORIGIN + timedelta(seconds=float(row["deletion_time"]))
            if start < JULY[1] and end > JULY[0] and end > start:
                gpus = Decimal(milli) / 1000 if n == 1 else Decimal(n)
                pods.append({"name": row["name"], "gpus": gpus, "start": start, "end": end, "qos": row["qos"]})
    return pods


@pytest.mark.skipif(not OPENB.is_dir(), reason="the openb trace sample is not under ../shared/data")
def test_a_month_of_openb_pods_is_billed_by_share_and_reconciles(cast):
    pods = openb_pods()
    with (OPENB / "openb_node_list_gpu_node.csv").open() as f:
        capacity = sum(int(node["gpu"]) for node in csv.DictReader(f))
    declare(capacity, model=MODEL, cluster="openb", since="2026-03-01")
    set_rate(MODEL, "1.50")
    records = [
        {"kind": "job", "cluster": "openb", "job_id": p["name"], "user": "openb", "project": f"openb-{p['qos']}",
         "team": TEAMS[p["qos"]], "gpus": float(p["gpus"]) if p["gpus"] % 1 else int(p["gpus"]), "gpu_model": MODEL,
         "submit_time": p["start"].isoformat(), "start_time": p["start"].isoformat(),
         "end_time": p["end"].isoformat(), "state": "completed"}
        for p in pods
    ]  # fmt: skip

    with time_machine.travel(datetime(2026, 8, 2, tzinfo=UTC), tick=False):
        ingest(records)

    shared = [p for p in pods if p["gpus"] < 1]
    assert len(pods) > 1000 and len(shared) > 0.3 * len(pods)  # the trace's sharing, not a handful of cases
    expected: dict[str, Decimal] = {}
    for p in pods:
        held = min(p["end"], JULY[1]) - max(p["start"], JULY[0])
        expected[TEAMS[p["qos"]]] = expected.get(TEAMS[p["qos"]], Decimal(0)) + p["gpus"] * Decimal(
            held.total_seconds()
        ) / 3600 * Decimal("1.50")
    july = Charge.objects.filter(kind="usage", month=JULY[0].date()).values("team__slug").annotate(c=Sum("cost"))
    billed = {r["team__slug"]: cents(r["c"]) for r in july}
    assert billed == {team: cents(amount) for team, amount in expected.items()}
    assert_billing_invariants()
