import json

import pytest
from django.core.management import CommandError, call_command

from collectors.records import decode_record_line, encode
from governance.usage.models import IngestBatch, Job, Sample
from tests.factories import job_record, sample_record

pytestmark = pytest.mark.django_db


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_it_imports_json_lines_through_the_ingest_path(tmp_path, capsys, django_capture_on_commit_callbacks):
    file = _write(tmp_path / "usage.jsonl", [job_record(), sample_record(), sample_record(ts="2026-11-03T09:16:00Z")])

    with django_capture_on_commit_callbacks(execute=True):
        call_command("import_usage", file)

    assert (Job.objects.count(), Sample.objects.count()) == (1, 2)
    assert IngestBatch.objects.get().processed_at is not None
    assert "stored 3 records" in capsys.readouterr().out


def test_importing_the_same_file_twice_changes_nothing(tmp_path, django_capture_on_commit_callbacks):
    file = _write(tmp_path / "usage.jsonl", [job_record(), sample_record()])

    with django_capture_on_commit_callbacks(execute=True):
        call_command("import_usage", file)
    with django_capture_on_commit_callbacks(execute=True):
        call_command("import_usage", file)

    assert (IngestBatch.objects.count(), Sample.objects.count()) == (1, 1)


def test_a_bad_line_is_named_and_nothing_is_imported(tmp_path):
    file = _write(tmp_path / "usage.jsonl", [job_record(), sample_record(sm_util=-5)])

    with pytest.raises(CommandError, match=r"line 2: .*sm_util"):
        call_command("import_usage", file)

    assert (IngestBatch.objects.count(), Job.objects.count()) == (0, 0)


def test_records_encoded_by_the_collector_import_unchanged(tmp_path, django_capture_on_commit_callbacks):
    line = encode(decode_record_line(json.dumps(sample_record()).encode()))
    (tmp_path / "one.jsonl").write_bytes(line + b"\n")

    with django_capture_on_commit_callbacks(execute=True):
        call_command("import_usage", str(tmp_path / "one.jsonl"))

    assert Sample.objects.get().sm_util == 87.5


def test_a_record_dated_in_the_future_is_refused_by_line_and_nothing_is_imported(tmp_path):
    file = _write(tmp_path / "usage.jsonl", [job_record(), sample_record(ts="9999-12-31T00:00:00Z")])

    with pytest.raises(CommandError, match="line 2: ts: is after"):
        call_command("import_usage", file)

    assert IngestBatch.objects.count() == 0


def test_a_cluster_name_unfit_for_a_url_is_refused_by_line(tmp_path):
    file = _write(tmp_path / "usage.jsonl", [job_record(cluster="a/b")])

    with pytest.raises(CommandError, match=r"line 1: .*letters, digits"):
        call_command("import_usage", file)
