from decimal import Decimal

import pytest
import time_machine
from django.core.management import call_command
from django.core.management.base import CommandError

from governance.costs.models import DeclaredCapacity, MonthClose, RateCard
from tests.costs.conftest import declare, set_rate
from tests.factories import H100, at, ingest, job_record

pytestmark = pytest.mark.django_db


def test_set_rate_stores_an_effective_dated_rate(db, capsys):
    call_command("set_rate", H100, "2.75", "--currency", "EUR", "--valid-from", "2026-11-15")

    card = RateCard.objects.get()
    assert (card.price_per_gpu_hour, card.currency, card.valid_from) == (
        Decimal("2.75"),
        "EUR",
        at("2026-11-15T00:00:00Z"),
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["2.00", "--currency", "USS"], "'USS' is not an ISO 4217 currency code"),
        (["-1", "--currency", "USD"], "price: must not be negative"),
        (["abc", "--currency", "USD"], "price: 'abc' is not a number"),
        (["2.00", "--currency", "USD", "--valid-from", "yesterday"], "--valid-from: 'yesterday' is not a date"),
    ],
)
def test_set_rate_refuses_bad_input_and_writes_nothing(db, args, message):
    if "--valid-from" not in args:
        args = [*args, "--valid-from", "2026-11-01"]

    with pytest.raises(CommandError, match=message):
        call_command("set_rate", H100, *args)
    assert not RateCard.objects.exists()


def test_one_currency_for_all_rate_cards(db):
    set_rate(H100, "2.00")

    with pytest.raises(CommandError, match="currency: EUR differs from the rate cards in force"):
        call_command("set_rate", "Other GPU", "1.00", "--currency", "EUR", "--valid-from", "2026-11-01")


def test_set_capacity_declares_gpus_of_a_cluster(db, capsys):
    call_command("set_capacity", "slurm-a", H100, "16", "--valid-from", "2026-10-01")

    row = DeclaredCapacity.objects.get()
    assert (row.cluster.name, row.gpu_model, row.count) == ("slurm-a", H100, 16)


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_chargeback_prints_a_table_of_teams(cast, capsys):
    set_rate(H100, "2.00")
    declare(2)
    ingest([job_record(gpus=2, end_time="2026-11-03T19:12:00Z", state="completed")])

    call_command("chargeback", "2026-11", "--team", "nlp", "--format", "table")

    out = capsys.readouterr().out
    assert "NLP" in out and "40.00" in out


@time_machine.travel("2026-12-02T10:00:00Z", tick=False)
def test_close_month_closes_once(cast, capsys):
    call_command("close_month", "2026-11")

    with pytest.raises(CommandError, match="already closed"):
        call_command("close_month", "2026-11")
    assert MonthClose.objects.count() == 1
