"""Commitments: a team reserves 4 A100s at a committed price. Covered GPU-hours cost the committed price and bill
nothing, overage costs the rate card less the negotiated discount, the unused part is its own row and the
purchase row bills the fee; FOCUS ListCost >= ContractedCost >= EffectiveCost as the spec defines them."""

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db.models import Sum

from governance.costs.focus import _python_csv, focus_csv
from governance.costs.models import Charge, Commitment, StatementLine
from governance.costs.selectors import chargeback_by_team, reconcile, statement_charges
from governance.costs.services import commitment_set, statement_close
from governance.efficiency.services import findings_evaluate_all
from governance.fleet.models import Cluster
from governance.lib.money import to_cents
from governance.lib.months import Month
from tests.costs.conftest import A100, declare, set_rate
from tests.factories import at, committed, ingest, job_record, series
from tests.invariants import assert_billing_invariants, assert_waste_within_bill, closed_totals

pytestmark = pytest.mark.django_db

OCT, NOV = Month(2026, 10), Month(2026, 11)
DAY3 = "2026-11-03"


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def run(job_id: str, gpus: int, start: str, end: str, team: str = "nlp", project: str = "llm-pretrain",
        sm: float = 80.0) -> None:  # fmt: skip
    """A job of `gpus` A100s from start to end, its first GPU sampled every 10 minutes at `sm` % SM."""
    ingest([
        job_record(job_id=job_id, gpus=gpus, gpu_model=A100, team=team, project=project, submit_time=start,
                   start_time=start, end_time=end, state="completed"),
        *series(start=at(start), minutes=int((at(end) - at(start)).total_seconds() // 60), every_s=600,
                job_id=job_id, gpu_model=A100, gpu_uuid=f"GPU-{job_id}", sm_util=sm),
    ])  # fmt: skip


def commit(cast, start: str = "2026-11-03", end: str = "2026-11-04") -> None:
    with committed():
        commitment_set(team=cast.nlp, cluster="c1", gpu_model=A100, gpus=4, price="2.50", start=moment(start),
                       end=moment(end), contracted_discount_percent="10", name="A100 reservation")  # fmt: skip


def rows_of(chunks) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO("".join(c if isinstance(c, str) else c.decode() for c in chunks))))


def money(text: str) -> Decimal:
    return Decimal(text)


@pytest.fixture
def reserved(cast, cluster):
    """A100s listed at 4.00/GPU-h, 8 declared; NLP commits 4 of them on 3 November at 2.50 with 10% off the rest.

    NLP's job 1 holds 2 GPUs 08:00-12:00 (under the commitment) and job 2 holds 4 GPUs 10:00-11:00 (6 in that
    hour: 2 over); Vision's job 3 holds 1 GPU 09:00-10:00, idle, outside any commitment."""
    set_rate(A100, "4.00")
    declare(8, model=A100)
    commit(cast)
    run("1", 2, f"{DAY3}T08:00:00Z", f"{DAY3}T12:00:00Z", sm=0.0)
    run("2", 4, f"{DAY3}T10:00:00Z", f"{DAY3}T11:00:00Z")
    run("3", 1, f"{DAY3}T09:00:00Z", f"{DAY3}T10:00:00Z", team="vision", project="detector", sm=0.0)
    return cast


def _row(kind: str, job_ref: str = "") -> Charge:
    return Charge.objects.get(month=NOV.start.date(), kind=kind, job_ref=job_ref)


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_covered_usage_costs_the_committed_price_and_overage_the_contracted_rate(reserved):
    one, two, three = _row("usage", "1"), _row("usage", "2"), _row("usage", "3")

    # Job 1: 8 GPU-h, of which 2 x 2 + 4/3 (its share of the full hour) + 2 covered; job 2: 8/3 of its 4 covered.
    assert (one.commitment_gpu_hours, two.commitment_gpu_hours) == (Decimal("7.333333"), Decimal("2.666667"))
    for row in (one, two):
        assert row.list_cost == row.gpu_hours * 4
        assert row.contracted_cost == row.list_cost * Decimal("0.9")
        assert row.cost < row.contracted_cost <= row.list_cost
        overage = row.gpu_hours - row.commitment_gpu_hours
        assert to_cents(row.billed_cost) == to_cents(row.contracted_cost * overage / row.gpu_hours)
        assert to_cents(row.cost) == to_cents(row.commitment_gpu_hours * Decimal("2.50") + row.billed_cost)
    # Vision has no commitment: every column is the list price.
    assert three.list_cost == three.contracted_cost == three.billed_cost == three.cost == Decimal("4.00")


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_the_unused_commitment_is_its_own_row_and_the_purchase_bills_the_fee(reserved):
    unused, purchase = _row("unused"), _row("purchase")
    covered = Charge.objects.filter(kind="usage", commitment__isnull=False).aggregate(h=Sum("commitment_gpu_hours"))[
        "h"
    ]

    assert covered == Decimal("10.000000")
    assert (unused.team_name, unused.gpu_hours, to_cents(unused.cost), unused.billed_cost) == (
        "NLP", 4 * 24 - covered, to_cents((4 * 24 - covered) * Decimal("2.50")), 0)  # fmt: skip
    assert (purchase.team_name, purchase.cost, to_cents(purchase.billed_cost), purchase.gpu_hours) == (
        "NLP", 0, to_cents(Decimal(4 * 24) * Decimal("2.50")), 0)  # fmt: skip


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_the_lead_reads_the_unused_commitment_as_its_own_line_of_the_team_month(client, reserved):
    unused = to_cents(_row("unused").cost)
    client.force_login(reserved.nlp_lead)

    page = client.get("/costs/team/nlp/?month=2026-11").content.decode()

    assert "(unused commitment)" in page
    assert f"{unused:,.2f}" in page
    assert "(none)" not in page


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_the_team_is_billed_what_it_is_charged_and_every_check_holds(reserved):
    findings_evaluate_all(now=at("2026-11-20T12:00:00Z"))
    nlp = Charge.objects.filter(month=NOV.start.date(), team_id=reserved.nlp.pk)
    sums = nlp.aggregate(billed=Sum("billed_cost"), effective=Sum("cost"))
    # 4 GPUs x 24 h x 2.50 for the commitment, plus the overage at 3.60: 2 GPU-h (hour 10-11).
    assert to_cents(sums["billed"]) == to_cents(sums["effective"]) == Decimal("247.20")
    charged = {c.team: to_cents(c.cost) for c in chargeback_by_team(month=NOV)}
    assert charged["NLP"] == Decimal("247.20")
    assert reconcile(month=NOV).ok
    waste = assert_waste_within_bill()
    assert waste["jobs"], "the idle jobs were found wasting"
    assert_billing_invariants()


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_a_commitment_nobody_draws_on_is_all_unused(cast, cluster):
    set_rate(A100, "4.00")
    declare(8, model=A100)
    commit(cast, start="2026-11-05", end="2026-11-06")
    from tests.factories import priced

    priced()
    assert to_cents(_row("unused").cost) == to_cents(_row("purchase").billed_cost) == Decimal("240.00")
    assert_billing_invariants()


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_a_commitment_dated_into_a_closed_month_is_refused_naming_the_month(cast, cluster):
    set_rate(A100, "4.00")
    declare(8, model=A100)
    statement_close(month=OCT)

    with pytest.raises(ValidationError, match=r"start: .* closed month 2026-10"):
        commit(cast, start="2026-10-30", end="2026-11-30")
    with pytest.raises(ValidationError, match="end: must come after start"):
        commit(cast, start="2026-11-05", end="2026-11-05")
    commit(cast, start="2026-11-05", end="2026-11-06")
    with pytest.raises(ValidationError, match="already has a commitment"):
        commit(cast, start="2026-11-05T12:00:00", end="2026-11-07")


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_late_usage_into_a_closed_month_with_a_commitment_lands_as_a_correction_next_month(cast, cluster):
    set_rate(A100, "4.00")
    declare(8, model=A100)
    commit(cast, start="2026-10-03", end="2026-10-04")
    run("1", 2, "2026-10-03T08:00:00Z", "2026-10-03T12:00:00Z")
    statement_close(month=OCT)
    frozen = StatementLine.objects.filter(close__month=OCT.start.date())
    assert set(frozen.values_list("kind", flat=True)) >= {"usage", "unused", "purchase"}
    before = closed_totals()

    run("2", 4, "2026-10-03T10:00:00Z", "2026-10-03T11:00:00Z")

    late = Charge.objects.filter(month=NOV.start.date(), kind="adjustment", corrects=OCT.start.date(),
                                 team_id=cast.nlp.pk)  # fmt: skip
    # Job 2's hour drew the commitment's spare 2 GPUs (already paid for: the unused row gives them back) and took
    # 2 GPU-h beyond it at 3.60: the team is corrected by the overage alone, billed and charged alike.
    assert to_cents(late.aggregate(c=Sum("cost"))["c"]) == to_cents(late.aggregate(c=Sum("billed_cost"))["c"])
    assert to_cents(late.aggregate(c=Sum("cost"))["c"]) == Decimal("7.20")
    assert set(late.values_list("corrected_kind", flat=True)) == {"usage", "unused"}
    assert_billing_invariants(before)


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_the_focus_csv_carries_list_contracted_effective_and_billed_cost_and_the_commitment(reserved):
    for rows in (rows_of(focus_csv(month=NOV)), rows_of(_python_csv(statement_charges(month=NOV), NOV))):
        by = {(r["x_ChargeKind"], r["ResourceName"]): r for r in rows}
        # Job 1 is mostly covered; job 3 (Vision) is outside any commitment.
        covered, uncovered = by[("usage", "1")], by[("usage", "3")]
        unused, purchase = by[("unused", "")], by[("purchase", "")]
        assert covered["CommitmentDiscountStatus"] == "Used"
        assert covered["CommitmentDiscountId"] == purchase["CommitmentDiscountId"] == unused["CommitmentDiscountId"]
        assert covered["CommitmentDiscountName"] == "A100 reservation"
        assert (covered["CommitmentDiscountCategory"], covered["CommitmentDiscountType"]) == ("Usage", "Reservation")
        assert money(covered["EffectiveCost"]) < money(covered["ContractedCost"]) <= money(covered["ListCost"])
        assert (covered["ListUnitPrice"], covered["ContractedUnitPrice"]) == ("4.000000", "3.600000")
        assert (uncovered["ListCost"], uncovered["ContractedCost"], uncovered["EffectiveCost"],
                uncovered["BilledCost"]) == ("4.000000", "4.000000", "4.000000", "4.000000")  # fmt: skip
        assert (uncovered["CommitmentDiscountStatus"], uncovered["CommitmentDiscountId"]) == ("", "")
        assert (unused["CommitmentDiscountStatus"], unused["BilledCost"], unused["ChargeCategory"]) == (
            "Unused", "0.000000", "Usage")  # fmt: skip
        assert money(unused["EffectiveCost"]) == to_cents(Decimal("86") * Decimal("2.50"))
        assert (purchase["ChargeCategory"], purchase["ChargeFrequency"], purchase["EffectiveCost"]) == (
            "Purchase", "Recurring", "0.000000")  # fmt: skip
        assert money(purchase["BilledCost"]) == Decimal("240")
        assert (purchase["CommitmentDiscountQuantity"], purchase["CommitmentDiscountUnit"]) == (
            "96.000000",
            "GPU-Hours",
        )
    assert rows_of(focus_csv(month=NOV)) == rows_of(_python_csv(statement_charges(month=NOV), NOV))


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_an_admin_sets_a_commitment_through_the_api_and_only_its_teams_lead_and_finance_see_it(client, cast, cluster):
    set_rate(A100, "4.00")
    body = {
        "team": "nlp",
        "cluster": "c1",
        "gpu_model": A100,
        "gpus": 4,
        "price_per_gpu_hour": "2.50",
        "contracted_discount_percent": "10",
        "start": "2026-11-21T00:00:00Z",
        "end": "2026-12-21T00:00:00Z",
    }
    client.force_login(cast.admin)
    assert client.post("/api/v1/commitments/", body, content_type="application/json").status_code == 201
    refused = client.post("/api/v1/commitments/", {**body, "start": "2026-11-25T00:00:00Z"},
                          content_type="application/json")  # fmt: skip
    assert refused.status_code == 400 and "already has a commitment" in refused.json()["error"]["message"]

    seen = {}
    for who in ("finance", "nlp_lead", "vision_lead", "alice"):
        client.force_login(getattr(cast, who))
        seen[who] = [(c["team"], c["gpus"]) for c in client.get("/api/v1/commitments/").json()["results"]]
    assert seen == {"finance": [("nlp", 4)], "nlp_lead": [("nlp", 4)], "vision_lead": [], "alice": []}


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_a_job_of_unknown_gpu_count_draws_on_the_commitment_by_the_gpus_its_samples_show(cast, cluster):
    set_rate(A100, "4.00")
    declare(8, model=A100)
    commit(cast)
    ingest([  # Slurm without GPU accounting: the count is unknown; one GPU reports for two hours.
        job_record(job_id="9", gpus=None, gpu_model=A100, submit_time=f"{DAY3}T08:00:00Z",
                   start_time=f"{DAY3}T08:00:00Z", end_time=f"{DAY3}T10:00:00Z", state="completed"),
        *series(start=at(f"{DAY3}T08:00:00Z"), minutes=120, every_s=600, job_id="9", gpu_model=A100,
                gpu_uuid="GPU-9", sm_util=70.0),
    ])  # fmt: skip

    usage = _row("usage", "9")

    assert (usage.gpu_hours, usage.commitment_gpu_hours) == (Decimal("2.000000"), Decimal("2.000000"))
    assert (to_cents(usage.cost), to_cents(usage.list_cost), usage.billed_cost) == (Decimal("5.00"), Decimal("8.00"), 0)
    assert _row("unused").gpu_hours == 4 * 24 - 2
    assert_billing_invariants()


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_an_admin_sets_a_commitment_from_the_command_line_and_bad_input_names_the_argument(cast, cluster):
    set_rate(A100, "4.00")
    declare(8, model=A100)
    out = io.StringIO()

    with committed():
        call_command("set_commitment", "nlp", "c1", A100, "4", "2.50", "--start", "2026-11-03", "--end", "2026-11-04",
                     "--discount", "10", "--name", "A100 reservation", stdout=out)  # fmt: skip

    assert "commitment set" in out.getvalue()
    assert to_cents(_row("purchase").billed_cost) == Decimal("240.00")
    with pytest.raises(CommandError, match="team: no team 'nobody'"):
        call_command("set_commitment", "nobody", "c1", A100, "4", "2.50", "--start", "2026-11-05", "--end",
                     "2026-11-06")  # fmt: skip
    with pytest.raises(CommandError, match="already has a commitment"):
        call_command("set_commitment", "nlp", "c1", A100, "2", "2.00", "--start", "2026-11-03T12:00", "--end",
                     "2026-11-05")  # fmt: skip
    with pytest.raises(CommandError, match="price"):
        call_command("set_commitment", "nlp", "c1", A100, "2", "cheap", "--start", "2026-11-10", "--end", "2026-11-11")
    assert_billing_invariants()


@time_machine.travel("2026-11-20T12:00:00Z", tick=False)
def test_the_admin_refuses_a_second_commitment_of_the_team_for_the_same_model_and_time(client, cast, cluster):
    set_rate(A100, "4.00")
    declare(8, model=A100)
    commit(cast)
    cast.admin.is_superuser = True
    cast.admin.save()
    client.force_login(cast.admin)

    with committed():
        response = client.post("/admin/costs/commitment/add/", {
            "name": "again", "team": cast.nlp.pk, "cluster": Cluster.objects.get(name="c1").pk, "gpu_model": A100,
            "gpus": 2, "price_per_gpu_hour": "2.00", "contracted_discount_percent": "0", "currency": "USD",
            "start_0": "2026-11-03", "start_1": "12:00:00", "end_0": "2026-11-05", "end_1": "00:00:00",
        })  # fmt: skip

    assert response.status_code == 200  # the form again, with the error on its start
    assert "NLP already has a commitment for" in response.content.decode()
    assert Commitment.objects.count() == 1
