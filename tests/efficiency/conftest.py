from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.factories import at, ingest, iso, job_record, rate, series

START = at("2026-11-03T09:00:00Z")
GIB = 1024.0


def a_job(*, minutes: int, job_id: str = "4242", gpus: int = 1, labels: dict | None = None, **job: Any) -> dict:
    """An ended job from START, `minutes` long."""
    fields = {
        "job_id": job_id,
        "gpus": gpus,
        "submit_time": iso(START),
        "start_time": iso(START),
        "end_time": iso(START + timedelta(minutes=minutes)),
        "state": "completed",
        "labels": labels or {"kind": "training"},
    }
    return job_record(**{**fields, **job})


def gpu(*, minutes: int, offset: int = 0, job_id: str = "4242", uuid: str = "GPU-0000-0001", **fields: Any) -> list:
    """One GPU's samples, one a minute, from START + offset minutes."""
    fields.setdefault("mem_used_mib", 20 * GIB)
    return series(start=START + timedelta(minutes=offset), minutes=minutes, job_id=job_id, gpu_uuid=uuid, **fields)


@pytest.fixture
def findings(cast):
    """Ingest records through the real path, evaluate every job, and return {rule: finding} of live findings."""
    from governance.efficiency.models import Finding
    from governance.efficiency.services import findings_evaluate_all

    rate(price="2.00")

    def run(records: list[dict]) -> dict:
        ingest(records)
        findings_evaluate_all(now=at("2026-11-10T00:00:00Z"))
        return {f.rule: f for f in Finding.objects.filter(state__in=["open", "acknowledged"])}

    return run
