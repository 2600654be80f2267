"""The Alibaba GenAI serving pods (../shared/data) imported as one-GPU inference jobs, through ingest.

The trace has no GPU model; the pods' memory ceiling (about 40-47 GiB) fits an 80 GB card, so they are
imported as H100 80GB jobs (an assumption, stated in the report).
"""

import csv
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

import pytest
from django.db.models import Sum

from governance.costs.models import Charge
from governance.efficiency.models import Finding
from governance.efficiency.services import findings_evaluate_all
from tests.factories import H100, H100_MIB, at, ingest, iso, job_record, rate, sample_record
from tests.invariants import assert_savings_within_spend, assert_waste_within_bill

pytestmark = pytest.mark.django_db
SHARED = Path(__file__).resolve().parents[2].parent / "shared"
TRACE = SHARED / "data/traces/alibaba-genai-2026-pod-gpu/pod_gpu_timeseries_sample.csv"
T0 = at("2026-11-01T00:00:00Z")


def pod_records(model: str = H100) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = defaultdict(list)
    with TRACE.open() as f:
        for row in csv.DictReader(f):
            if row["gpu_util_pct"] and row["gpu_mem_used_bytes"]:
                rows[row["pod"]].append(row)
    out = {}
    for i, (pod, samples) in enumerate(sorted(rows.items())):
        times = [T0 + timedelta(seconds=int(float(r["t_rel_s"]))) for r in samples]
        job = job_record(job_id=pod, user="genai", project="llm-pretrain", gpus=1, submit_time=iso(min(times)),
                         start_time=iso(min(times)), end_time=iso(max(times) + timedelta(seconds=57)),
                         state="completed", labels={"kind": "inference"}, gpu_model=model)  # fmt: skip
        out[pod] = [job] + [
            sample_record(
                job_id=pod,
                gpu_uuid=f"GPU-{pod}",
                gpu_model=model,
                node=f"node-{i:03d}",
                ts=iso(t),
                sm_util=float(r["gpu_util_pct"]),
                power_w=None,
                mem_used_mib=min(float(r["gpu_mem_used_bytes"]) / 2**20, H100_MIB),
            )
            for t, r in zip(times, samples, strict=True)
        ]
    return out


@pytest.mark.skipif(not TRACE.exists(), reason="the shared Alibaba GenAI trace is not here (../shared/data)")
def test_the_genai_serving_pods_give_idle_low_utilisation_and_mig_findings(cast, capsys):
    rate(price="2.00")
    pods = pod_records()
    for records in pods.values():
        ingest(records)
    findings_evaluate_all(now=at("2026-11-10T00:00:00Z"))

    counts = defaultdict(int)
    for rule in Finding.objects.values_list("rule", flat=True):
        counts[rule] += 1
    means = {pod: sum(r["sm_util"] for r in recs[1:]) / (len(recs) - 1) for pod, recs in pods.items() if len(recs) > 1}
    lowest = sorted(means, key=means.get)[:3]
    with capsys.disabled():
        print(f"\n{len(pods)} pods; findings per rule: {dict(sorted(counts.items()))}")
        for pod in lowest:
            print(f"{pod} (mean SM {means[pod]:.2f}%):")
            for f in Finding.objects.filter(job__external_id=pod).order_by("-waste"):
                print(f"  {f.rule}: {f.advice}")
    assert counts["idle_gpu"] >= 3  # the three pods at about 0% holding ~17 GiB
    assert counts["low_utilization"] > len(pods) / 2


@pytest.mark.skipif(not TRACE.exists(), reason="the shared Alibaba GenAI trace is not here (../shared/data)")
def test_the_genai_pods_waste_adds_up_to_at_most_each_pods_bill(cast, capsys):
    a100 = "NVIDIA A100-SXM4-80GB"
    rate(a100, price="1.80")
    for records in pod_records(a100).values():
        ingest(records)
    findings_evaluate_all(now=at("2026-11-10T00:00:00Z"))

    figures = assert_waste_within_bill()
    bills = dict(Charge.objects.filter(kind="usage").values("job__external_id").annotate(c=Sum("cost")).values_list(
        "job__external_id", "c"))  # fmt: skip
    rows = Finding.objects.values("job__external_id").annotate(waste=Sum("waste"), savings=Sum("savings"))
    over_before = 0
    with capsys.disabled():
        print("\npod: bill / savings over the last 30 days -> waste (both partitions of the bill)")
        for row in rows.order_by("job__external_id"):
            bill = bills[row["job__external_id"]]
            over_before += row["savings"] > bill
            print(f"  {row['job__external_id']}: {bill:.2f} / {row['savings']:.2f} -> {row['waste']:.2f}")
        total = rows.aggregate(w=Sum("waste"), s=Sum("savings"))
        print(f"  total: {sum(bills.values()):.2f} / {total['s']:.2f} -> {total['w']:.2f}; "
              f"{over_before} pods' savings exceed their bill")  # fmt: skip
    assert len(figures["jobs"]) == len(bills)
    assert over_before == 0  # before issue 27 the monthly extrapolation promised more than the bill
    assert_savings_within_spend()
    assert total["w"] <= sum(bills.values())
