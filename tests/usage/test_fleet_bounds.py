"""The per-node bound counts the GPUs a node reported lately with those a batch names: a GPU named again counts once,
a MIG instance a seventh, and a GPU gone for longer than GOVERNANCE_GPU_GONE_AFTER_HOURS not at all."""

import pytest
import time_machine

from collectors.records import BatchInvalid
from governance.fleet.models import Gpu
from governance.usage.services import usage_batch_receive
from tests.factories import batch_body, ingest, sample_record

pytestmark = pytest.mark.django_db


def on_node(first: int, count: int, ts: str = "2026-11-03T09:00:00Z", **fields) -> list[dict]:
    return [
        sample_record(gpu_uuid=f"GPU-{n:04d}", gpu_index=n, ts=ts, job_id=None, **fields)
        for n in range(first, first + count)
    ]


@pytest.fixture
def fourteen_gpus(settings):
    settings.FLEET_MAX_GPUS_PER_NODE = 16
    with time_machine.travel("2026-11-03T10:00:00Z", tick=False):
        ingest(on_node(0, 14))
        yield


def test_known_gpus_named_again_count_once_and_new_ones_fill_the_node_to_its_bound(fourteen_gpus):
    usage_batch_receive(body=batch_body(on_node(10, 6, ts="2026-11-03T09:30:00Z")))  # 4 known, 2 new: 16

    with pytest.raises(BatchInvalid) as refused:
        usage_batch_receive(body=batch_body(on_node(10, 7, ts="2026-11-03T09:30:00Z")))  # 4 known, 3 new: 17

    assert [(e.index, e.field) for e in refused.value.errors] == [(6, "gpu_uuid")]
    assert "would hold 17 GPUs" in refused.value.errors[0].reason


def test_mig_instances_count_a_seventh_and_a_part_over_the_bound_is_refused(fourteen_gpus):
    mig = on_node(100, 15, ts="2026-11-03T09:30:00Z", mig_profile="1g.10gb")  # 14 + 15/7 = 16 1/7

    with pytest.raises(BatchInvalid) as refused:
        usage_batch_receive(body=batch_body(mig))

    assert [e.index for e in refused.value.errors] == [14]
    assert "would hold 17 GPUs" in refused.value.errors[0].reason
    usage_batch_receive(body=batch_body(mig[:14]))  # 14 + 2: at the bound


def test_gpus_gone_longer_than_the_window_do_not_count(fourteen_gpus):
    with time_machine.travel("2026-11-05T10:00:00Z", tick=False):  # 48 h later: the fourteen are gone
        usage_batch_receive(body=batch_body(on_node(100, 16, ts="2026-11-05T09:00:00Z")))

    assert Gpu.objects.count() == 14  # received, not processed: the inbox holds the batch
