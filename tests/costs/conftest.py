from datetime import UTC, datetime
from decimal import Decimal

import pytest

from governance.costs.services import capacity_set, rate_card_set
from governance.fleet.models import Cluster
from governance.lib.money import to_cents

A100 = "NVIDIA A100-SXM4-80GB"


def declare(count: int, model: str = "NVIDIA H100 80GB HBM3", cluster: str = "c1", since: str = "2026-01-01"):
    return capacity_set(
        cluster=cluster, gpu_model=model, count=count, valid_from=datetime.fromisoformat(since).replace(tzinfo=UTC)
    )


def set_rate(model: str, price: str, since: str = "2026-01-01", cluster: str | None = None):
    return rate_card_set(gpu_model=model, price=price, currency="USD", cluster=cluster,
                         valid_from=datetime.fromisoformat(since).replace(tzinfo=UTC))  # fmt: skip


def share_policy(cluster: str = "c1") -> None:
    Cluster.objects.filter(name=cluster).update(unallocated_policy=Cluster.UnallocatedPolicy.SHARE)


def cents(value: Decimal | str | int) -> Decimal:
    return to_cents(Decimal(value))


def by_team(charges) -> dict[str, Decimal]:
    return {c.team: to_cents(c.cost) for c in charges}


@pytest.fixture
def cluster(db) -> Cluster:
    return Cluster.objects.create(name="c1")
