"""Corrections of closed months as finance sees them: each names the month it corrects and why, lands in the first
open month, and leaves every closed statement as it was."""

import csv
import io

import pytest
import time_machine

from governance.costs.breakdowns import team_breakdown
from governance.costs.focus import focus_csv
from governance.costs.selectors import UNALLOCATED, chargeback_by_team, statement_charges
from governance.costs.services import statement_close
from governance.lib.months import Month
from tests.costs.conftest import by_team, cents, declare, set_rate, share_policy
from tests.factories import H100, committed, ingest, job_record
from tests.invariants import assert_billing_invariants, closed_totals

pytestmark = pytest.mark.django_db

NOV, DEC, JAN = Month(2026, 11), Month(2026, 12), Month(2027, 1)
SHARE_REASON = "correction of 2026-11: late usage changed the share of unallocated capacity"


def job(job_id: str, start: str, end: str, team: str = "nlp", project: str = "llm-pretrain"):
    return job_record(job_id=job_id, gpus=1, start_time=start, submit_time=start, end_time=end, state="completed",
                      team=team, project=project)  # fmt: skip


def close(month: Month, when: str) -> None:
    with time_machine.travel(when, tick=False), committed():
        statement_close(month=month)


def adjustments(month: Month) -> set[tuple[str, str, str, object]]:
    return {(c.team, c.reason, str(c.corrects), cents(c.cost)) for c in statement_charges(month=month)
            if c.kind == "adjustment"}  # fmt: skip


@pytest.fixture
def shared_november(cast, cluster):
    """Two GPUs at 2.00 shared by team weight; NLP and Vision each ran 2 GPU-hours in November, then it closed."""
    set_rate(H100, "2.00")
    declare(2)
    share_policy()
    ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-03T02:00:00Z")])
    ingest([job("2", "2026-11-04T00:00:00Z", "2026-11-04T02:00:00Z", team="vision", project="detector")])
    close(NOV, "2026-12-02T10:00:00Z")


def test_a_share_policy_month_splits_unallocated_capacity_by_team_weight_when_it_closes(shared_november):
    november = by_team(chargeback_by_team(month=NOV))

    # 2 GPUs x 720 h x 2.00 = 2,880.00; 8.00 used, the other 2,872.00 shared half and half.
    assert november == {"NLP": cents(1440), "Vision": cents(1440)}
    assert cents(team_breakdown(month=NOV, team_id=team_id("nlp")).unallocated_share) == cents(1436)
    assert_billing_invariants()


def team_id(slug: str) -> int:
    from governance.org.models import Team

    return Team.objects.get(slug=slug).pk


@time_machine.travel("2026-12-03T10:00:00Z", tick=False)
def test_late_usage_on_a_shared_cluster_moves_the_shares_by_corrections_in_the_next_month(shared_november):
    before = closed_totals()

    ingest([job("3", "2026-11-10T00:00:00Z", "2026-11-10T03:00:00Z", team="vision", project="detector")])

    # Re-priced under November's frozen share policy: Vision now used 10.00 of 14.00, so of the 2,866.00 left it
    # bears 10/14 (2,047.14) and NLP 4/14 (818.86). The differences land in December, naming November.
    assert adjustments(DEC) == {
        ("Vision", "correction of 2026-11: late usage", "2026-11", cents(6)),
        ("Vision", SHARE_REASON, "2026-11", cents("611.14")),
        ("NLP", SHARE_REASON, "2026-11", cents("-617.14")),
    }
    assert by_team(chargeback_by_team(month=NOV)) == {"NLP": cents(1440), "Vision": cents(1440)}
    assert_billing_invariants(before)


@time_machine.travel("2026-12-03T10:00:00Z", tick=False)
def test_a_team_lead_reads_the_correction_and_the_share_on_the_next_months_breakdown(shared_november):
    ingest([job("3", "2026-11-10T00:00:00Z", "2026-11-10T03:00:00Z", team="vision", project="detector")])

    vision = team_breakdown(month=DEC, team_id=team_id("vision"))

    assert cents(vision.adjustments) == cents("617.14")
    assert {project: cents(cost) for project, cost in vision.by_project.items() if "correction" in project} == {
        "Detector (correction)": cents(6),
        "(share of unallocated) (correction)": cents("611.14"),
    }


@pytest.fixture
def closed_november(cast, cluster):
    set_rate(H100, "2.00")
    declare(2)
    ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-03T02:00:00Z")])
    close(NOV, "2026-12-02T10:00:00Z")


def test_late_usage_for_november_after_december_closed_lands_in_january(closed_november):
    close(DEC, "2027-01-02T10:00:00Z")
    before = closed_totals()

    with time_machine.travel("2027-01-03T10:00:00Z", tick=False):
        ingest([job("2", "2026-11-10T00:00:00Z", "2026-11-10T03:00:00Z")])

    assert adjustments(JAN) == {
        ("NLP", "correction of 2026-11: late usage", "2026-11", cents(6)),
        (UNALLOCATED, "correction of 2026-11: late usage on capacity billed as unallocated", "2026-11", cents(-6)),
    }
    assert adjustments(DEC) == set()
    with time_machine.travel("2027-01-03T10:00:00Z", tick=False):
        assert_billing_invariants(before)


@time_machine.travel("2026-12-03T10:00:00Z", tick=False)
def test_the_statement_can_be_read_without_its_corrections(closed_november):
    ingest([job("2", "2026-11-10T00:00:00Z", "2026-11-10T03:00:00Z")])

    kinds = {c.kind for c in statement_charges(month=DEC, adjustments=False)}

    assert "adjustment" not in kinds
    assert {c.kind for c in statement_charges(month=DEC)} >= {"adjustment", "unallocated"}


@time_machine.travel("2026-12-03T10:00:00Z", tick=False)
def test_the_focus_csv_lists_a_correction_as_an_adjustment_naming_the_month_it_corrects(shared_november):
    ingest([job("3", "2026-11-10T00:00:00Z", "2026-11-10T03:00:00Z", team="vision", project="detector")])

    text = "".join(c if isinstance(c, str) else c.decode() for c in focus_csv(month=DEC))
    rows = [r for r in csv.DictReader(io.StringIO(text)) if r["ChargeCategory"] == "Adjustment"]

    share = f"Correction of 2026-11: late usage changed the share of unallocated capacity (c1, {H100})"
    assert {(r["SubAccountName"], r["ChargeClass"], r["x_CorrectsMonth"], r["ChargeDescription"],
             cents(r["BilledCost"])) for r in rows} == {
        ("Vision", "Correction", "2026-11", "Correction of 2026-11: late usage of job 3 on c1", cents(6)),
        ("Vision", "Correction", "2026-11", share, cents("611.14")),
        ("NLP", "Correction", "2026-11", share, cents("-617.14")),
    }  # fmt: skip
