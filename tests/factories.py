"""Builders of ingest records and reference rows, with defaults a test overrides by keyword."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.test import TestCase

from collectors.records import decode_batch
from governance.usage.services import batch_check, usage_batch_process, usage_batch_receive, usage_batch_store

H100 = "NVIDIA H100 80GB HBM3"
H100_MIB = 81559.0


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def job_record(**overrides: Any) -> dict[str, Any]:
    record = {
        "kind": "job",
        "cluster": "c1",
        "job_id": "4242",
        "user": "alice",
        "project": "llm-pretrain",
        "team": "nlp",
        "gpus": 1,
        "gpu_model": H100,
        "submit_time": "2026-11-03T09:00:00Z",
        "start_time": "2026-11-03T09:12:00Z",
        "end_time": None,
        "state": "running",
        "labels": {"kind": "training"},
    }
    record.update(overrides)
    return record


def sample_record(**overrides: Any) -> dict[str, Any]:
    record = {
        "kind": "sample",
        "cluster": "c1",
        "node": "gpu-017",
        "gpu_uuid": "GPU-0000-0001",
        "gpu_index": 0,
        "gpu_model": H100,
        "ts": "2026-11-03T09:15:00Z",
        "job_id": "4242",
        "sm_util": 87.5,
        "mem_used_mib": 61234.0,
        "mem_total_mib": H100_MIB,
        "power_w": 612.0,
        "gpu_numa_node": 0,
        "job_cpu_numa_nodes": [0],
        "mig_profile": None,
    }
    record.update(overrides)
    return record


def series(*, start: datetime, minutes: int, every_s: int = 60, **fields: Any) -> list[dict[str, Any]]:
    """Samples of one GPU every `every_s` seconds for `minutes` minutes; a callable field gets the offset (s)."""
    out = []
    for offset in range(0, minutes * 60, every_s):
        values = {k: (v(offset) if callable(v) else v) for k, v in fields.items()}
        out.append(sample_record(ts=iso(start + timedelta(seconds=offset)), **values))
    return out


def batch_body(records: list[dict[str, Any]], batch_id: str | None = None, collector: str = "test") -> bytes:
    return json.dumps({"batch_id": batch_id or str(uuid.uuid4()), "collector": collector, "records": records}).encode()


def committed():
    """Run what the code under test left for after its commit (tasks enqueued on commit: processing, pricing),
    as a real commit would; tests run inside a transaction that never commits."""
    return TestCase.captureOnCommitCallbacks(execute=True)


def ingest(records: list[dict[str, Any]], batch_id: str | None = None, *, via: str = "import") -> uuid.UUID:
    """Through the real path: validate, store in the inbox, process (what the worker does), then price.

    By default as an operator's import would (`manage.py import_usage`): a record naming an unknown team and
    project creates them, which is how most tests set up their data. `via="api"`: as a collector's batch through
    the ingest API, which never creates teams or projects (tests/security/test_ingest_edge.py).
    """
    from governance.usage.models import IngestBatch

    body = batch_body(records, batch_id)
    with committed():
        if via == "api":
            receipt = usage_batch_receive(body=body)
        else:
            batch = decode_batch(body)
            batch_check(batch=batch, clusters=None, backfill=True)
            receipt = usage_batch_store(batch=batch, body=body, source=IngestBatch.Source.IMPORT)
        inbox = IngestBatch.objects.get(batch_id=receipt.batch_id)
        usage_batch_process(inbox_pk=inbox.pk)
    assert decode_batch(body).batch_id == receipt.batch_id
    return receipt.batch_id


def priced() -> None:
    """Re-price what is marked now (what the worker does after each change)."""
    from governance.costs.reprice import charges_reprice

    charges_reprice()


def rate(model: str = H100, price: str = "2.00", valid_from: str = "2026-01-01T00:00:00Z", currency: str = "USD"):
    from governance.costs.services import rate_card_set

    with committed():
        return rate_card_set(gpu_model=model, price=Decimal(price), valid_from=at(valid_from), currency=currency)
