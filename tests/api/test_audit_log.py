"""One audit log for every door: who, when, from where, what, before and after; append-only."""

from decimal import Decimal

import pytest
import time_machine
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

from governance.api.models import AuditEntry
from governance.costs.models import Budget, RateCard
from governance.fleet.models import Cluster
from tests.costs.conftest import declare, set_rate
from tests.factories import H100, committed, ingest, job_record
from tests.invariants import assert_billing_invariants

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, cast):
    cast.admin.is_superuser = True
    cast.admin.save()
    client.force_login(cast.admin)
    return client


@pytest.fixture
def november(cast):
    Cluster.objects.create(name="c1")
    set_rate(H100, "2.00")
    declare(4)
    ingest([job_record(job_id="1", gpus=2, end_time="2026-11-03T19:12:00Z", state="completed")])


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_it_records_a_month_closed_on_the_page_with_finance_as_actor(client, cast, november):
    client.force_login(cast.finance)

    with committed():
        client.post("/costs/close/2026-11/", REMOTE_ADDR="10.1.2.3")

    entry = AuditEntry.objects.get(model="costs.monthclose")
    assert (entry.action, entry.door, entry.where, entry.actor, entry.address) == (
        "close", "page", "/costs/close/2026-11/", cast.finance, "10.1.2.3",
    )  # fmt: skip
    assert entry.changes["month"] == [None, "2026-11-01"] and entry.object_repr
    assert_billing_invariants()


def test_it_records_a_cluster_a_rate_card_a_token_and_a_budget_made_in_the_admin(admin_client, cast):
    admin_client.post("/admin/fleet/cluster/add/", {"name": "east", "unallocated_policy": "show"})
    with committed():
        admin_client.post("/admin/costs/ratecard/add/", {
            "gpu_model": H100, "price_per_gpu_hour": "3.00", "currency": "USD",
            "valid_from_0": "2026-01-01", "valid_from_1": "00:00:00",
        })  # fmt: skip
    admin_client.post("/admin/api/apitoken/add/", {"user": cast.admin.pk, "name": "ci", "scope": "read",
                                                   "clusters": "", "expires_at": ""})  # fmt: skip
    admin_client.post("/admin/costs/budget/add/", {
        "team": cast.nlp.pk, "month": "2027-01-01", "amount": "100.00", "currency": "USD", "thresholds": "[50]",
        "webhook_url": "",
    })  # fmt: skip

    made = {e.model: e for e in AuditEntry.objects.filter(door="admin", action="create")}
    assert {"fleet.cluster", "costs.ratecard", "api.apitoken", "costs.budget"} <= set(made)
    assert all(e.actor == cast.admin and e.where.startswith("/admin/") for e in made.values())
    assert made["fleet.cluster"].changes["name"] == [None, "east"]
    before, after = made["costs.ratecard"].changes["price_per_gpu_hour"]
    assert before is None and Decimal(after) == Decimal("3.00")
    assert "key_hash" not in made["api.apitoken"].changes
    assert made["costs.budget"].object_pk == str(Budget.objects.get().pk)


def test_it_records_an_admin_change_with_before_and_after(admin_client, cast):
    west = Cluster.objects.create(name="west")

    admin_client.post(f"/admin/fleet/cluster/{west.pk}/change/", {"name": "west", "unallocated_policy": "share"})

    entry = AuditEntry.objects.get(door="admin", model="fleet.cluster")
    assert (entry.action, entry.changes) == ("update", {"unallocated_policy": ["show", "share"]})


def test_it_records_api_writes_with_the_token_and_its_name(client, cast):
    from governance.api.services import api_token_create

    _, raw = api_token_create(user=cast.admin, name="terraform", scope="admin")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}

    with committed():
        client.post(
            "/api/v1/rates/",
            {"gpu_model": H100, "price_per_gpu_hour": "2.50", "valid_from": "2027-01-01T00:00:00Z"},
            content_type="application/json",
            **auth,
        )
    client.post("/api/v1/clusters/", {"name": "north"}, content_type="application/json", **auth)

    entries = AuditEntry.objects.filter(door="api").order_by("id")
    assert [(e.model, e.actor, e.token_name, e.where) for e in entries] == [
        ("costs.ratecard", cast.admin, "terraform", "/api/v1/rates/"),
        ("fleet.cluster", cast.admin, "terraform", "/api/v1/clusters/"),
    ]


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_it_records_a_close_a_token_and_a_budget_made_through_the_api(client, cast, november):
    from governance.api.services import api_token_create

    _, raw = api_token_create(user=cast.finance, name="books", scope="write")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}

    with committed():
        closed = client.post("/api/v1/months/2026-11/close/", **auth)
    budget = client.post("/api/v1/budgets/", {"team": "nlp", "month": "2026-12", "amount": "10.00"},
                         content_type="application/json", **auth)  # fmt: skip
    client.force_login(cast.admin)
    token = client.post("/api/v1/tokens/", {"name": "ci", "scope": "read"}, content_type="application/json")

    assert (closed.status_code, budget.status_code, token.status_code) == (201, 201, 201)
    made = {e.model: e for e in AuditEntry.objects.filter(door="api")}
    assert (made["costs.monthclose"].action, made["costs.monthclose"].actor, made["costs.monthclose"].token_name) == (
        "close", cast.finance, "books",
    )  # fmt: skip
    assert made["costs.budget"].changes["amount"][1] == "10.00" and made["costs.budget"].token_name == "books"
    assert (made["api.apitoken"].actor, made["api.apitoken"].token_name) == (cast.admin, "")
    assert_billing_invariants()


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_it_records_a_month_closed_by_the_command(cast, november):
    with committed():
        call_command("close_month", "2026-11")

    entry = AuditEntry.objects.get(model="costs.monthclose")
    assert (entry.door, entry.where, entry.action) == ("command", "close_month", "close")
    assert_billing_invariants()


def test_it_records_commands_with_their_name_and_the_account_that_ran_them(cast):
    with committed():
        call_command("set_rate", H100, "4.00", "--valid-from", "2027-01-01")
    call_command("create_api_token", "admin", "--scope", "read", "--name", "cron")

    rate, token = (AuditEntry.objects.get(door="command", model=m) for m in ("costs.ratecard", "api.apitoken"))
    assert (rate.where, rate.action, token.where) == ("set_rate", "create", "create_api_token")
    assert rate.actor_name and rate.actor is None
    assert RateCard.objects.filter(price_per_gpu_hour="4.00").exists()


def test_no_door_updates_or_deletes_an_entry(cast):
    entry = AuditEntry.objects.filter(model="org.team").first()
    assert entry is not None

    with pytest.raises(ValueError):
        entry.delete()
    with pytest.raises(ValueError):
        entry.save()

    assert AuditEntry.objects.get(pk=entry.pk).changes == entry.changes


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the append-only trigger is PostgreSQL's")
def test_postgresql_refuses_a_raw_update_or_delete_of_an_entry(cast):
    entry = AuditEntry.objects.filter(model="org.team").first()
    assert entry is not None

    for sql in ("UPDATE api_auditentry SET changes = '{}' WHERE id = %s", "DELETE FROM api_auditentry WHERE id = %s"):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, [entry.pk])

    assert AuditEntry.objects.get(pk=entry.pk).changes == entry.changes


def test_deleting_a_user_keeps_their_entries_with_their_name(cast):
    from governance.org.models import User

    ghost = User.objects.create_user("ghost", password="pw-ghost-1234")
    entry = AuditEntry.objects.get(model="org.user", object_pk=str(ghost.pk), action="create")
    AuditEntry.objects.create(actor=ghost, actor_name="ghost", action="update", model="org.team", object_pk="1",
                              object_repr="x")  # fmt: skip

    ghost.delete()

    assert AuditEntry.objects.filter(actor_name="ghost", actor__isnull=True).exists()
    assert AuditEntry.objects.get(pk=entry.pk).changes["username"] == [None, "ghost"]
