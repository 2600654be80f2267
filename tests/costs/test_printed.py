"""Money as printed: every table's lines add up to its printed total, a team's month is the same figure on the
statement, the team page, the overview, the API and every CSV, corrections show where money is, and the CSVs are
data a spreadsheet can sum."""

import csv
import io
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
import time_machine
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.costs.corrections import REASONS
from governance.costs.ledger import AMOUNTS, UNALLOCATED, UNATTRIBUTED
from governance.costs.models import Charge
from governance.costs.services import statement_close
from governance.costs.summaries import ledger_days_rebuild
from governance.fleet.models import Cluster
from governance.lib.money import to_cents
from governance.lib.months import Month
from tests.costs.conftest import declare, set_rate
from tests.factories import H100, committed, ingest, job_record
from tests.invariants import assert_billing_invariants, assert_printed_totals_add_up, closed_totals

pytestmark = pytest.mark.django_db

NOV, DEC = Month(2026, 11), Month(2026, 12)
NOW = "2026-12-02T10:00:00Z"

amount = st.decimals(min_value=Decimal("0"), max_value=Decimal("20000"), places=10, allow_nan=False)
credit = st.decimals(min_value=Decimal("-500"), max_value=Decimal("0"), places=10, allow_nan=False)
# A random month's ledger: (team, project, cost, idle share of it) usage lines, unallocated days, one correction.
ledgers = st.tuples(
    st.lists(
        st.tuples(st.sampled_from(["nlp", "vision", None]), st.sampled_from(["a", "b", "c"]), amount,
                  st.decimals(min_value=0, max_value=1, places=3)),
        min_size=1, max_size=25,
    ),
    st.lists(amount, max_size=5),
    credit,
)  # fmt: skip


def _row(cluster: Cluster, n: int, **fields) -> Charge:
    day = date(2026, 11, 1 + n % 30)
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    amounts = {a: fields.get(a, Decimal(0)) for a in AMOUNTS}
    return Charge(month=NOV.start.date(), day=day, period_start=start, period_end=start, cluster=cluster,
                  cluster_name=cluster.name, currency="USD", priced_at=start, gpu_model=H100,
                  **{**fields, **amounts})  # fmt: skip


def write_ledger(cast, cluster: Cluster, ledger) -> None:
    usage, unallocated, correction = ledger
    teams = {"nlp": cast.nlp, "vision": cast.vision}
    rows = []
    for n, (slug, project, cost, idle) in enumerate(usage):
        team = teams.get(slug) if slug else None
        rows.append(_row(cluster, n, kind="usage", team=team, team_name=team.name if team else UNATTRIBUTED,
                         project_name=project, user_name="alice", gpu_hours=cost / 3, cost=cost,
                         idle_cost=(cost * idle).quantize(Decimal("1e-10"))))  # fmt: skip
    for n, cost in enumerate(unallocated):
        rows.append(_row(cluster, n, kind="unallocated", team_name=UNALLOCATED, gpu_hours=cost / 3, cost=cost))
    if correction:
        rows.append(_row(cluster, 0, kind="adjustment", team=cast.nlp, team_name="NLP", project_name="a",
                         cost=correction, corrects=date(2026, 10, 1), corrected_kind="usage",
                         reason="correction of 2026-10: late usage"))  # fmt: skip
    Charge.objects.bulk_create(rows)
    ledger_days_rebuild()  # written by hand, not by a pricing pass: its summary too


def csv_rows(response) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


@time_machine.travel(NOW, tick=False)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ledger=ledgers)
def test_a_teams_month_is_one_figure_everywhere_and_every_statement_adds_up_as_printed(client, cast, ledger):
    with transaction.atomic():
        cluster = Cluster.objects.create(name="c1")
        write_ledger(cast, cluster, ledger)
        exact = sum((c.cost for c in Charge.objects.all()), Decimal(0))

        client.force_login(cast.finance)
        statement = client.get("/costs/", {"month": "2026-11"}).context
        overview = client.get("/", {"month": "2026-11"}).context
        client.force_login(cast.nlp_lead)
        team = client.get("/costs/team/nlp/", {"month": "2026-11"}).context
        api = client.get("/api/v1/chargeback/", {"month": "2026-11", "team": "nlp"}).json()
        overview_csv = [
            r for r in csv_rows(client.get("/chargeback.csv", {"month": "2026-11"})) if r["month"] == str(NOV)
        ]
        projects = csv_rows(client.get("/costs/team/nlp/projects.csv", {"month": "2026-11"}))

        # The statement: lines rounded once, the Total their sum and the exact total rounded.
        printed = [c.printed_cost for c, *_ in statement["rows"]]
        assert statement["total"] == sum(printed, Decimal(0)) == to_cents(exact)
        assert overview["cost"] == statement["total"]
        assert overview["unallocated"] == sum((c.printed_cost for c, *_ in statement["rows"] if c.unallocated), 0)
        nlp = next((c for c, *_ in statement["rows"] if c.team_id == cast.nlp.pk), None)
        if nlp is not None:
            figures = {
                "team page": team["cost"],
                "API": Decimal(api[0]["cost"]),
                "overview CSV": Decimal(next(r["cost"] for r in overview_csv if r["team"] == "NLP")),
                "projects.csv": sum((Decimal(r["Cost"]) for r in projects), Decimal(0)),
                "team lines": sum((amounts[1] for _, amounts in team["lines"]), Decimal(0)),
            }
            assert set(figures.values()) == {nlp.printed_cost}, figures
            assert abs(nlp.printed_cost - nlp.cost) < Decimal("0.02")
            assert sum((Decimal(r["Idle cost"]) for r in projects), Decimal(0)) == team["idle_cost"]
        # Random rows have no capacity behind them, so reconcile does not apply; the printing invariant does.
        assert_printed_totals_add_up()
        transaction.set_rollback(True)


def job(job_id: str, start: str, end: str, gpus: int = 1) -> dict:
    return job_record(job_id=job_id, gpus=gpus, submit_time=start, start_time=start, end_time=end, state="completed")


@pytest.fixture
def late_usage(cast):
    """November closed with NLP's job 1; then job 2 of November arrives late (through ingest) on declared capacity."""
    Cluster.objects.create(name="c1")
    set_rate(H100, "2.00")
    declare(2)
    ingest([job("1", "2026-11-03T00:00:00Z", "2026-11-03T02:00:00Z")])
    with time_machine.travel(NOW, tick=False), committed():
        statement_close(month=NOV)
    before = closed_totals()
    with time_machine.travel("2026-12-03T10:00:00Z", tick=False):
        ingest([job("2", "2026-11-10T00:00:00Z", "2026-11-10T03:00:00Z")])
    return before


@time_machine.travel("2027-01-04T10:00:00Z", tick=False)
def test_the_month_that_receives_corrections_lists_them_and_the_overview_agrees_with_its_statement(
    client, cast, late_usage
):
    client.force_login(cast.finance)

    page = client.get("/costs/", {"month": "2026-12"})
    confirm = client.get("/costs/close/2026-12/")
    overview = client.get("/", {"month": "2026-12"}).context

    corrections = {(str(c.corrects), c.team, c.reason, c.printed_cost) for c in page.context["corrections"]}
    # Job 2 held a GPU 3 hours at 2.00: plus 6.00 to NLP, minus 6.00 to the capacity billed as unallocated.
    assert corrections == {
        ("2026-11", "NLP", "correction of 2026-11: late usage", Decimal("6.00")),
        ("2026-11", UNALLOCATED, f"correction of 2026-11: {REASONS['unallocated']}", Decimal("-6.00")),
    }  # fmt: skip
    job = next(c for c in page.context["corrections"] if c.team == "NLP").jobs
    assert [ref for _, ref in job] == ["c1/2"] and f'href="/jobs/{job[0][0]}/"'.encode() in page.content
    assert b'id="corrections-table"' in page.content and b'id="corrections-table"' in confirm.content
    unallocated = next(c for c, *_ in page.context["rows"] if c.unallocated)
    assert overview["unallocated"] == unallocated.printed_cost
    assert overview["cost"] == page.context["total"]
    assert_billing_invariants(late_usage)


@time_machine.travel(NOW, tick=False)
def test_finance_signs_in_to_the_statement_of_the_last_complete_month_and_an_admin_to_the_overview(client, cast):
    finance = client.post("/accounts/login/", {"username": "finance", "password": "pw-finance-1234"})
    client.logout()
    admin = client.post("/accounts/login/", {"username": "admin", "password": "pw-admin-1234"})
    client.logout()
    going = client.post("/accounts/login/?next=/findings/", {"username": "finance", "password": "pw-finance-1234"})

    assert finance.status_code == 302 and finance["Location"] == "/costs/?month=2026-11"
    assert admin["Location"] == "/" and going["Location"] == "/findings/"


@time_machine.travel(NOW, tick=False)
def test_a_teams_table_csvs_hold_numbers_a_spreadsheet_can_sum_with_the_currency_in_its_own_column(client, cast):
    Cluster.objects.create(name="c1")
    set_rate(H100, "2.50")
    declare(4)
    ingest([job(str(n), "2026-11-03T00:00:00Z", "2026-11-20T00:00:00Z", gpus=n) for n in (1, 3)])
    client.force_login(cast.nlp_lead)
    team = client.get("/costs/team/nlp/", {"month": "2026-11"}).context

    for table in ("projects", "users", "models", "top-cost"):
        rows = csv_rows(client.get(f"/costs/team/nlp/{table}.csv", {"month": "2026-11"}))
        assert rows and {r["Currency"] for r in rows} == {"USD"}, table
        assert all("," not in r["Cost"] and "USD" not in r["Cost"] for r in rows), table
        costs = [Decimal(r["Cost"]) for r in rows]
        hours = [Decimal(r["GPU-hours"]) for r in rows]
        # 4 GPUs x 17 days x 24 h = 1,632 GPU-hours at 2.50: 4,080.00, above a thousand (no separator in a cell).
        assert sum(costs) == team["cost"] == Decimal("4080.00") and sum(hours) == Decimal("1632.0"), table
    assert_billing_invariants()


@time_machine.travel(NOW, tick=False)
def test_an_engineers_jobs_add_up_to_the_cost_of_their_month_as_printed(client, cast):
    Cluster.objects.create(name="c1")
    set_rate(H100, "1.00")
    declare(4)
    # Three jobs of 20 minutes on one GPU: a third of 1.00 each, 0.33 alone, and 1.00 together.
    ingest([job(str(n), f"2026-11-0{n}T10:00:00Z", f"2026-11-0{n}T10:20:00Z") for n in (1, 2, 3)])
    client.force_login(cast.alice)

    page = client.get("/me/", {"month": "2026-11"})
    api = client.get("/api/v1/me/month/", {"month": "2026-11"}).json()

    costs = [row[4].data for row in page.context["table"].rows]
    assert b'id="my-cost">1.00 USD' in page.content and api["cost"] == "1.00"
    assert sorted(costs) == [Decimal("0.33"), Decimal("0.33"), Decimal("0.34")]
    assert [Decimal(j["cost"]) for j in api["jobs"]] == costs
    assert_billing_invariants()
