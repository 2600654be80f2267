from datetime import UTC, datetime

import pytest
from django.db.models import Count, F, FloatField, Sum
from django.db.models.functions import Cast, NullIf

from governance.dashboard.selectors import cluster_utilisation
from governance.usage.models import ClusterHour, GpuHour
from tests.factories import at, ingest, series

pytestmark = pytest.mark.django_db
DAY = (datetime(2026, 11, 3, tzinfo=UTC), datetime(2026, 11, 4, tzinfo=UTC))


def from_gpu_hours() -> dict[datetime, tuple[float, int]]:
    """What the overview read before the rollup: every GPU-hour of the day, summed per hour."""
    rows = (
        GpuHour.objects.filter(hour__gte=DAY[0], hour__lt=DAY[1], samples__gt=0)
        .values("hour")
        .annotate(used=Sum(F("sm_sum") / Cast(NullIf("sm_samples", 0), FloatField()) / 100.0), n=Count("id"))
    )
    return {r["hour"]: (round(r["used"], 9), r["n"]) for r in rows}


def from_rollup() -> dict[datetime, tuple[float, int]]:
    return {
        h.hour: (round(h.used_gpu_hours, 9), int(h.capacity_gpu_hours))
        for h in cluster_utilisation(start=DAY[0], end=DAY[1])
    }


def test_the_cluster_hours_equal_the_gpu_hours_they_sum(usage):
    assert ClusterHour.objects.count() == 4  # 10:00 to 13:00, one cluster
    assert from_rollup() == from_gpu_hours()
    assert from_rollup()[at("2026-11-03T11:00:00Z")] == (1.5, 4)  # 90 % and 60 % of four GPUs


def test_a_later_batch_for_an_hour_already_summed_moves_it(usage):
    ingest(series(start=at("2026-11-03T11:00:00Z"), minutes=60, every_s=600, job_id=None, node="gpu-018",
                  gpu_uuid="GPU-018-0", gpu_index=0, sm_util=50.0))  # fmt: skip

    assert from_rollup()[at("2026-11-03T11:00:00Z")] == (2.0, 5)
    assert from_rollup() == from_gpu_hours()
