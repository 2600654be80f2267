"""Terms as an admin sets them (services, commands, the admin): a bad value is refused with an error naming the field,
a term dated into a closed month is refused naming the month, and a term that is accepted re-prices the open days."""

import json
import re
from decimal import Decimal
from io import StringIO

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from governance.costs.models import Budget, RateCard, UnallocatedPolicyTerm
from governance.costs.selectors import chargeback_by_team
from governance.costs.services import (
    billing_mode_set,
    budget_set,
    capacity_set,
    grid_intensity_set,
    policy_set,
    rate_card_set,
    statement_close,
)
from governance.fleet.models import Cluster
from governance.lib.months import Month
from governance.org.models import Team
from tests.costs.conftest import by_team, cents, declare, set_rate
from tests.factories import H100, at, committed, ingest, job_record
from tests.invariants import assert_billing_invariants, closed_totals

pytestmark = pytest.mark.django_db

NOV, DEC = Month(2026, 11), Month(2026, 12)
IN_NOVEMBER = at("2026-11-20T00:00:00Z")


def job(job_id: str, start: str, end: str, team: str = "nlp", project: str = "llm-pretrain"):
    return job_record(job_id=job_id, gpus=1, start_time=start, submit_time=start, end_time=end, state="completed",
                      team=team, project=project)  # fmt: skip


@pytest.fixture
def closed_november(cast, cluster):
    set_rate(H100, "2.00")
    declare(2)
    ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-03T02:00:00Z")])
    with time_machine.travel("2026-12-02T10:00:00Z", tick=False), committed():
        statement_close(month=NOV, user=cast.finance)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda: policy_set(cluster="c1", policy="share", valid_from=IN_NOVEMBER), "valid_from"),
        (lambda: billing_mode_set(cluster="c1", mode="showback", valid_from=IN_NOVEMBER), "valid_from"),
        (lambda: grid_intensity_set(cluster="c1", valid_from=IN_NOVEMBER, kg_co2e_per_kwh="0.4"), "valid_from"),
        (lambda: capacity_set(cluster="c1", gpu_model=H100, count=9, valid_from=IN_NOVEMBER), "valid_from"),
        (lambda: rate_card_set(gpu_model=H100, price="9", currency="USD", valid_from=IN_NOVEMBER), "valid_from"),
        (lambda: budget_set(team=Team.objects.get(slug="nlp"), month=NOV, amount="10"), "month"),
    ],
    ids=["policy", "billing mode", "grid intensity", "capacity", "rate card", "budget"],
)
@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_a_term_dated_into_a_closed_month_is_refused_naming_the_field_and_the_first_open_day(closed_november, change,
                                                                                            field):  # fmt: skip
    before = closed_totals()

    with pytest.raises(ValidationError) as refused:
        change()

    assert refused.value.messages == [
        f"{field}: {'2026-11-01T00:00:00+00:00' if field == 'month' else IN_NOVEMBER.isoformat()} falls in or before"
        " the closed month 2026-11; a closed month never changes (date the change from 2026-12-01 on)."
    ]
    assert_billing_invariants(before)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda: rate_card_set(gpu_model=H100, price="NaN", currency="USD", valid_from=IN_NOVEMBER),
         "price: 'NaN' is not a number."),
        (lambda: rate_card_set(gpu_model=H100, price="1", currency="USD", valid_from=IN_NOVEMBER,
                               energy_price_per_kwh="-0.1"),
         "energy_price_per_kwh: must not be negative (got -0.1)."),
        (lambda: rate_card_set(gpu_model="  ", price="1", currency="USD", valid_from=IN_NOVEMBER),
         "gpu_model: must not be empty (use '*' for the default rate)."),
        (lambda: rate_card_set(gpu_model=H100, price="1", currency="USD", valid_from=IN_NOVEMBER, cluster="nowhere"),
         "cluster: no cluster named 'nowhere'."),
        (lambda: capacity_set(cluster="c1", gpu_model=H100, count=-1, valid_from=IN_NOVEMBER),
         "count: must not be negative (got -1)."),
        (lambda: capacity_set(cluster="c1", gpu_model="", count=1, valid_from=IN_NOVEMBER),
         "gpu_model: must not be empty."),
        (lambda: policy_set(cluster="c1", policy="split", valid_from=IN_NOVEMBER),
         "policy: 'split' is not one of show, share."),
        (lambda: billing_mode_set(cluster="c1", mode="free", valid_from=IN_NOVEMBER),
         "mode: 'free' is not one of billed, showback."),
    ],
    ids=["price NaN", "negative energy price", "empty model", "unknown cluster", "negative count", "empty capacity",
         "unknown policy", "unknown mode"],
)  # fmt: skip
def test_a_bad_term_is_refused_with_the_field_named_and_nothing_written(cluster, change, message):
    with pytest.raises(ValidationError) as refused:
        change()

    assert refused.value.messages == [message]
    assert not RateCard.objects.exists() and not UnallocatedPolicyTerm.objects.exists()


def test_budget_thresholds_are_whole_percentages(cast):
    with pytest.raises(ValidationError, match=r"thresholds: use whole percentages between 1 and 1000\."):
        budget_set(team=cast.nlp, month=DEC, amount="100", thresholds=[50, 0])

    assert not Budget.objects.exists()


@time_machine.travel("2026-12-20T10:00:00Z", tick=False)
def test_set_policy_shares_the_unallocated_capacity_from_the_date_on(cast, cluster, capsys):
    set_rate(H100, "2.00")
    declare(1, since="2026-12-01")
    ingest([job("1", "2026-12-03T00:00:00Z", "2026-12-03T02:00:00Z")])

    with committed():  # the worker re-prices the open days the new term touches
        call_command("set_policy", "c1", "share", "--valid-from", "2026-12-01")

    # 1 GPU from Dec 1 to now (19 days 10 h = 466 h) at 2.00 = 932.00, all of it NLP's: its own 4.00 and the rest.
    assert by_team(chargeback_by_team(month=DEC)) == {"NLP": cents(932)}
    assert "policy set: c1: share from 2026-12-01" in capsys.readouterr().out
    assert_billing_invariants()


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_set_policy_refuses_a_date_in_the_closed_month(closed_november):
    with pytest.raises(CommandError, match="valid_from: 2026-11-20T00:00:00\\+00:00 falls in or before the closed"):
        call_command("set_policy", "c1", "share", "--valid-from", "2026-11-20")

    assert Cluster.objects.get(name="c1").unallocated_policy == "show"


def test_set_capacity_refuses_a_negative_count(db):
    with pytest.raises(CommandError, match=r"count: must not be negative \(got -3\)"):
        call_command("set_capacity", "c1", H100, "-3", "--valid-from", "2026-11-01")


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_the_reprice_command_reprices_a_whole_month_and_what_is_marked(cast, cluster):
    set_rate(H100, "2.00")
    declare(1)
    ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-03T02:00:00Z")])
    out = StringIO()

    call_command("reprice", "2026-11", stdout=out)

    # 1 job x 30 days, and the cluster's 30 days.
    assert out.getvalue().splitlines() == [
        "2026-11: 30 job-days, 30 cluster-days re-priced",
        "marked: 0 job-days, 0 cluster-days re-priced",
    ]
    assert by_team(chargeback_by_team(month=NOV)) == {"NLP": cents(4), "(unallocated)": cents(1440 - 4)}
    assert_billing_invariants()


def test_the_reprice_command_names_a_bad_month(db):
    with pytest.raises(CommandError, match="MONTH: "):
        call_command("reprice", "November")


@time_machine.travel("2026-11-16T10:00:00Z", tick=False)
def test_the_forecast_command_prints_json_per_team(cast, cluster):
    set_rate(H100, "2.00")
    declare(1)
    ingest([job(str(n), f"2026-11-{n:02d}T00:00:00Z", f"2026-11-{n:02d}T05:00:00Z") for n in range(1, 16)])
    out = StringIO()

    call_command("forecast", "2026-11", "--as-of", "2026-11-15", "--format", "json", stdout=out)

    rows = json.loads(out.getvalue())
    # 10.00 a day for 15 days: about 300.00 by the month's end.
    assert [(r["team"], r["currency"]) for r in rows] == [("NLP", "USD")]
    assert Decimal(rows[0]["low"]) <= Decimal("300.00") <= Decimal(rows[0]["high"])


@time_machine.travel("2026-11-16T10:00:00Z", tick=False)
def test_the_forecast_command_prints_a_line_per_team_with_its_interval(cast, cluster):
    set_rate(H100, "2.00")
    declare(1)
    ingest([job(str(n), f"2026-11-{n:02d}T00:00:00Z", f"2026-11-{n:02d}T05:00:00Z") for n in range(1, 16)])
    out = StringIO()

    call_command("forecast", "2026-11", stdout=out)  # as of yesterday, the 15th

    (line,) = out.getvalue().splitlines()
    team, forecast, low, high = re.fullmatch(r"(\w+): ([\d.]+) USD \(80%: ([\d.]+) to ([\d.]+)\)", line).groups()
    # 10.00 a day for 15 days: about 300.00 by the month's end.
    assert team == "NLP" and Decimal(low) <= Decimal(forecast) <= Decimal(high)
    assert Decimal(low) <= Decimal("300.00") <= Decimal(high)


def test_the_forecast_command_names_a_bad_as_of_date(db):
    with pytest.raises(CommandError, match="--as-of: 'mid-month' is not a date"):
        call_command("forecast", "2026-11", "--as-of", "mid-month")


def test_the_owned_rate_command_names_an_unknown_cluster(db):
    with pytest.raises(CommandError, match="cluster: no cluster named 'nowhere'"):
        call_command("owned_rate", "nowhere", H100, "--purchase", "30000", "--months", "36", "--from", "2026-11")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--purchase", "30000", "--months", "0"], "depreciation_months: at least 1"),
        (["--purchase", "3000", "--residual", "4000", "--months", "36"], "residual_value: more than the purchase"),
        (["--purchase", "lots", "--months", "36"], "--purchase: 'lots' is not a number"),
    ],
    ids=["no months", "residual over purchase", "not a number"],
)
def test_the_owned_rate_command_refuses_a_bad_cost_and_writes_no_rate(cluster, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("owned_rate", "c1", H100, *args, "--from", "2026-11", "--apply")

    assert not RateCard.objects.exists()


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_owned_rates_applied_after_a_close_write_only_the_open_months(closed_november):
    out = StringIO()

    call_command("owned_rate", "c1", H100, "--purchase", "30000", "--residual", "3000", "--months", "3", "--from",
                 "2026-10", "--apply", stdout=out)  # fmt: skip

    cards = RateCard.objects.filter(cluster__name="c1").order_by("valid_from")
    assert [f"{c.valid_from:%Y-%m}" for c in cards] == ["2026-12"]
    # 27,000 over 3 months: December's 9,000.00 over its 744 hours.
    assert cards[0].price_per_gpu_hour == Decimal("12.096774")
    assert "wrote the rate cards of the open months of 3" in out.getvalue()
