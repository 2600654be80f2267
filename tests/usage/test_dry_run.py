"""Issue 31 item 6: the agent's `--dry-run` prints whole batches as the ingest API takes them, one a line; posted
unchanged, each is accepted, and `import_usage` reads the same output."""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from governance.usage.models import IngestBatch, Sample
from tests.factories import committed

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def dry_run(*args: str) -> list[bytes]:
    result = subprocess.run(
        [sys.executable, "-m", "collectors", "--source", "simulate", "--cluster", "c1", "--once", "--dry-run", *args],
        cwd=ROOT, capture_output=True, timeout=60, check=True,
    )  # fmt: skip
    return result.stdout.splitlines()


def test_each_line_of_a_dry_run_is_a_batch_the_ingest_api_accepts_unchanged(client, ingest_token):
    lines = dry_run("--gpus", "5", "--node", "node-a", "--batch-size", "3")

    with committed():
        answers = [
            client.post("/api/v1/ingest/", data=line, content_type="application/json",
                        HTTP_AUTHORIZATION=f"Bearer {ingest_token}")
            for line in lines
        ]  # fmt: skip

    batches = [json.loads(line) for line in lines]
    records = [r for b in batches for r in b["records"]]
    assert len(lines) >= 2 and all(0 < len(b["records"]) <= 3 for b in batches)
    assert all(set(b) == {"batch_id", "collector", "records"} for b in batches)
    assert {b["collector"] for b in batches} == {"simulate@node-a"}
    assert [a.status_code for a in answers] == [202] * len(lines), [a.content for a in answers]
    assert {str(b.batch_id) for b in IngestBatch.objects.all()} == {b["batch_id"] for b in batches}
    assert Sample.objects.count() == sum(r["kind"] == "sample" for r in records) == 5


def test_import_usage_reads_a_dry_runs_output(tmp_path):
    path = tmp_path / "dry-run.jsonl"
    lines = dry_run("--gpus", "4", "--batch-size", "3")
    path.write_bytes(b"\n".join(lines) + b"\n")
    printed = sum(len(json.loads(line)["records"]) for line in lines)
    out = io.StringIO()

    with committed():
        call_command("import_usage", str(path), stdout=out)

    assert f"stored {printed} records" in out.getvalue()
    assert Sample.objects.count() == 4
