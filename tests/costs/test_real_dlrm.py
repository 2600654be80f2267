"""The real DLRM month (Alibaba cluster-trace-gpu-v2025 sample in ../shared/data): 1,114 one-GPU inference
instances of 31 apps (one team each) in October 2026, 640 declared A10s, a rate change on the 16th.

Finance closes October; then every kind of change a platform admin or a late collector can make. October never
moves by a cent, late usage lands as corrections in November equal to exactly what it cost, and every month
reconciles.
"""

import csv
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.db.models import F, Q, Sum

from governance.costs.models import Charge, StatementLine
from governance.costs.selectors import UNALLOCATED, chargeback_by_team
from governance.costs.services import capacity_set, commitment_set, policy_set, rate_card_set, statement_close
from governance.lib.months import Month
from governance.org.models import Project, Team
from tests.factories import committed, ingest, iso, job_record, series
from tests.invariants import assert_billing_invariants, closed_totals

pytestmark = pytest.mark.django_db

TRACE = Path(__file__).resolve().parents[3] / "shared" / "data" / "traces" / "alibaba-dlrm-2025"
A10 = "NVIDIA A10"
OCT, NOV = Month(2026, 10), Month(2026, 11)
AFTER_CLOSE = "2026-11-02T10:00:00Z"


def _instances() -> list[dict]:
    path = TRACE / "dlrm_instances_sample.csv"
    if not path.exists():
        pytest.skip(f"needs the DLRM trace sample at {path} (../shared/data, present in CI)")
    with path.open() as f:
        return [r for r in csv.DictReader(f) if r["role"] == "HN"]


def _records(rows: list[dict]) -> list[dict]:
    """Trace seconds from 1 October; an instance alive before the trace starts then, one alive after ends then."""
    start = OCT.start
    out = []
    for r in rows:
        began = start + timedelta(seconds=float(r["scheduled_time"] or r["creation_time"] or 0))
        ended = start + timedelta(seconds=float(r["deletion_time"])) if r["deletion_time"] else OCT.end
        out.append(job_record(
            cluster="dlrm", job_id=r["instance_sn"], user="svc", project=r["app_name"], team=r["app_name"],
            gpus=int(r["gpu_request"]), gpu_model=A10, submit_time=iso(began), start_time=iso(began),
            end_time=iso(ended), state="completed", labels={"kind": "inference"},
        ))  # fmt: skip
    return out


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def closed_october(db):
    with time_machine.travel(AFTER_CLOSE, tick=False):
        return _load_and_close()


def _load_and_close(commit_to: str | None = None) -> list[dict]:
    """Load October and close it; `commit_to` (an app) first gets a commitment of 8 A10s for the month."""
    rows = _instances()
    for app in sorted({r["app_name"] for r in rows}):
        team = Team.objects.create(slug=app.replace("_", "-"), name=app)
        Project.objects.create(team=team, slug=app, name=app)
    with committed():
        rate_card_set(gpu_model=A10, price="1.00", currency="USD", valid_from=_moment("2026-01-01"))
        rate_card_set(gpu_model=A10, price="1.20", currency="USD", valid_from=_moment("2026-10-16"))
        capacity_set(cluster="dlrm", gpu_model=A10, count=640, valid_from=_moment("2026-01-01"))
        if commit_to:
            commitment_set(team=Team.objects.get(name=commit_to), cluster="dlrm", gpu_model=A10, gpus=8, price="0.70",
                           start=OCT.start, end=OCT.end, contracted_discount_percent="5")  # fmt: skip
    records = _records(rows)
    for i in range(0, len(records), 400):
        ingest(records[i : i + 400])
    statement_close(month=OCT)
    return rows


def _october_by_team() -> dict[str, Decimal]:
    return {c.team: c.cost for c in chargeback_by_team(month=OCT)}


def _november_corrections() -> dict[tuple[str, str], Decimal]:
    rows = Charge.objects.filter(month=NOV.start.date(), kind="adjustment").values("team_name", "corrected_kind")
    return {(r["team_name"], r["corrected_kind"]): r["c"] for r in rows.annotate(c=Sum("cost"))}


@time_machine.travel(AFTER_CLOSE, tick=False)
def test_the_real_october_reconciles_and_its_capacity_is_640_a10s_at_both_rates(closed_october):
    charges = _october_by_team()

    capacity = 640 * (15 * 24 * Decimal("1.00") + 16 * 24 * Decimal("1.20"))
    assert sum(charges.values(), Decimal(0)).quantize(Decimal("0.01")) == capacity
    assert len(charges) == 32  # 31 apps and the unallocated line
    assert_billing_invariants()


@time_machine.travel(AFTER_CLOSE, tick=False)
def test_switching_the_policy_to_share_never_rebills_the_closed_october(closed_october):
    before = closed_totals()

    with pytest.raises(ValidationError, match="closed month 2026-10"):
        policy_set(cluster="dlrm", policy="share", valid_from=_moment("2026-10-20"))
    with committed():
        policy_set(cluster="dlrm", policy="share", valid_from=_moment("2026-11-01"))
    ingest([job_record(cluster="dlrm", job_id="nov-1", user="svc", project="app_3", team="app_3", gpus=4,
                       gpu_model=A10, submit_time="2026-11-01T00:00:00Z", start_time="2026-11-01T00:00:00Z",
                       end_time="2026-11-02T00:00:00Z", state="completed")])  # fmt: skip

    assert _november_corrections() == {}
    november = {c.team: c.cost for c in chargeback_by_team(month=NOV)}
    assert UNALLOCATED not in november  # November's free capacity is shared out, to the one team that ran
    assert november["app_3"].quantize(Decimal("0.01")) == Decimal(640 * 34) * Decimal("1.20")
    assert_billing_invariants(before)


@time_machine.travel(AFTER_CLOSE, tick=False)
def test_a_rate_or_capacity_dated_back_into_october_is_refused_and_a_later_one_leaves_it_alone(closed_october):
    before = closed_totals()

    with pytest.raises(ValidationError, match="closed month 2026-10"):
        rate_card_set(gpu_model=A10, price="9.00", currency="USD", valid_from=_moment("2026-10-20"))
    with pytest.raises(ValidationError, match="closed month 2026-10"):
        capacity_set(cluster="dlrm", gpu_model=A10, count=10, valid_from=_moment("2026-10-20"))
    with committed():
        rate_card_set(gpu_model=A10, price="9.00", currency="USD", valid_from=_moment("2026-11-01"))
        capacity_set(cluster="dlrm", gpu_model=A10, count=700, valid_from=_moment("2026-11-01"))
        # A first card for a model no October job ran on would also price earlier time: not October's.
        rate_card_set(gpu_model="NVIDIA L4", price="0.50", currency="USD", valid_from=_moment("2026-11-05"))

    assert _november_corrections() == {}
    assert_billing_invariants(before)


@time_machine.travel(AFTER_CLOSE, tick=False)
def test_late_usage_for_october_lands_in_november_as_exactly_its_cost(closed_october):
    before = closed_totals()
    late = job_record(cluster="dlrm", job_id="late-1", user="svc", project="app_3", team="app_3", gpus=2,
                      gpu_model=A10, submit_time="2026-10-20T00:00:00Z", start_time="2026-10-20T00:00:00Z",
                      end_time="2026-10-20T10:00:00Z", state="completed")  # fmt: skip

    ingest([late])

    # 2 GPUs x 10 h at the rate in force then (1.20 from the 16th), covered by declared capacity.
    assert _november_corrections() == {
        ("app_3", "usage"): Decimal("24.00"),
        (UNALLOCATED, "unallocated"): Decimal("-24.00"),
    }
    assert (
        Charge.objects.filter(kind="adjustment", corrects=OCT.start.date())
        .first()
        .reason.startswith("correction of 2026-10")
    )
    assert_billing_invariants(before)


@time_machine.travel(AFTER_CLOSE, tick=False)
def test_a_gpu_first_reporting_after_the_close_bills_its_job_and_takes_from_unallocated(closed_october):
    before = closed_totals()
    samples = series(start=_moment("2026-10-25T00:00:00"), minutes=180, every_s=300, cluster="dlrm", node="late-node",
                     gpu_uuid="GPU-late-0001", gpu_model=A10, job_id="pod-seen-late", mem_total_mib=23028.0,
                     mem_used_mib=1000.0)  # fmt: skip

    ingest(samples)

    corrections = _november_corrections()
    assert set(corrections) == {("(unattributed)", "usage"), (UNALLOCATED, "unallocated")}
    assert corrections[("(unattributed)", "usage")] == Decimal("3.60")  # 3 GPU-hours seen at 1.20
    assert sum(corrections.values()) == 0
    assert_billing_invariants(before)


@time_machine.travel(AFTER_CLOSE, tick=False)
def test_the_same_late_batch_twice_corrects_once(closed_october):
    before = closed_totals()
    late = job_record(cluster="dlrm", job_id="late-2", user="svc", project="app_3", team="app_3", gpus=1,
                      gpu_model=A10, submit_time="2026-10-05T00:00:00Z", start_time="2026-10-05T00:00:00Z",
                      end_time="2026-10-05T05:00:00Z", state="completed")  # fmt: skip

    ingest([late], batch_id="5b0d8a3e-0000-4000-8000-000000000001")
    ingest([late], batch_id="5b0d8a3e-0000-4000-8000-000000000001")
    ingest([late])  # the same record again under a new batch id: the job is the same job

    assert _november_corrections()[("app_3", "usage")] == Decimal("5.00")
    assert_billing_invariants(before)


COMMITTED_APP = "app_114"  # 2 to 15 GPUs over the month: under and over a commitment of 8


@pytest.fixture
def committed_october(db):
    with time_machine.travel(AFTER_CLOSE, tick=False):
        return _load_and_close(commit_to=COMMITTED_APP)


@time_machine.travel(AFTER_CLOSE, tick=False)
def test_a_commitment_on_one_real_app_bills_what_it_charges_and_late_usage_corrects_it(committed_october):
    frozen = StatementLine.objects.filter(close__month=OCT.start.date(), team__name=COMMITTED_APP)
    sums = frozen.aggregate(billed=Sum("billed_cost"), effective=Sum("cost"), fee=Sum("billed_cost", filter=Q(
        kind="purchase")), covered=Sum("commitment_gpu_hours", filter=Q(kind="usage")))  # fmt: skip
    assert sums["fee"].quantize(Decimal("0.01")) == Decimal(8 * 31 * 24) * Decimal("0.70")
    assert sums["billed"].quantize(Decimal("0.01")) == sums["effective"].quantize(Decimal("0.01"))
    assert 0 < sums["covered"] < 8 * 31 * 24, "the app drew on the commitment and left some of it unused"
    usage = frozen.filter(kind="usage")
    assert usage.filter(commitment_gpu_hours__gt=0, commitment_gpu_hours__lt=F("gpu_hours")).exists(), "overage"
    assert not usage.filter(contracted_cost__gt=F("list_cost")).exists()
    assert not usage.filter(commitment_gpu_hours__gt=0, cost__gte=F("contracted_cost")).exists()
    before = closed_totals()

    ingest([job_record(cluster="dlrm", job_id="late-c", user="svc", project=COMMITTED_APP, team=COMMITTED_APP,
                       gpus=2, gpu_model=A10, submit_time="2026-10-20T00:00:00Z", start_time="2026-10-20T00:00:00Z",
                       end_time="2026-10-20T10:00:00Z", state="completed")])  # fmt: skip

    late = Charge.objects.filter(month=NOV.start.date(), kind="adjustment", team_name=COMMITTED_APP)
    assert late.filter(corrected_kind="usage", job_ref="late-c").exists()
    sums = late.aggregate(billed=Sum("billed_cost"), effective=Sum("cost"))
    # What the commitment had spare covers part of the 20 GPU-h (already paid: the unused row gives it back); the
    # rest is overage at 1.20 less 5%. Billed and charged agree either way.
    assert sums["billed"].quantize(Decimal("0.01")) == sums["effective"].quantize(Decimal("0.01"))
    assert 0 <= sums["effective"] <= 20 * Decimal("1.20") * Decimal("0.95")
    assert_billing_invariants(before)
