from datetime import UTC, datetime
from decimal import Decimal

import pytest

from governance.costs.services import capacity_set, policy_set, rate_card_set
from governance.fleet.models import Cluster
from governance.lib.money import to_cents
from tests.factories import committed

A100 = "NVIDIA A100-SXM4-80GB"


def _moment(since: str) -> datetime:
    return datetime.fromisoformat(since).replace(tzinfo=UTC)


def declare(count: int, model: str = "NVIDIA H100 80GB HBM3", cluster: str = "c1", since: str = "2026-01-01"):
    with committed():
        return capacity_set(cluster=cluster, gpu_model=model, count=count, valid_from=_moment(since))


def set_rate(model: str, price: str, since: str = "2026-01-01", cluster: str | None = None):
    with committed():
        return rate_card_set(gpu_model=model, price=price, currency="USD", cluster=cluster, valid_from=_moment(since))


def share_policy(cluster: str = "c1", since: str = "2026-01-01") -> None:
    Cluster.objects.get_or_create(name=cluster)
    with committed():
        policy_set(cluster=cluster, policy=Cluster.UnallocatedPolicy.SHARE, valid_from=_moment(since))


def cents(value: Decimal | str | int) -> Decimal:
    return to_cents(Decimal(value))


def by_team(charges) -> dict[str, Decimal]:
    return {c.team: to_cents(c.cost) for c in charges}


@pytest.fixture
def cluster(db) -> Cluster:
    return Cluster.objects.create(name="c1")
