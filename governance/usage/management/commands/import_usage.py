import hashlib
import sys
from pathlib import Path

import msgspec
from django.core.management.base import CommandError
from django.db import transaction

from collectors.records import BatchInvalid, decode_line
from governance.lib.doors import AuditedCommand
from governance.usage.services import usage_records_import

CHUNK = 5000
MAX_ERRORS = 20


class Command(AuditedCommand):
    help = (
        "Import usage records through the ingest path: JSON Lines of job and sample records, or of whole batches "
        "(what the agent's --dry-run prints)."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="JSON Lines file, or - for standard input")
        parser.add_argument("--collector", default="import")

    def handle(self, *args, file: str, collector: str, **options):
        data = sys.stdin.buffer.read() if file == "-" else self._read(file)
        digest = hashlib.sha256(data).hexdigest()
        lines = data.splitlines()
        progress = self.stderr.isatty() and options["verbosity"] > 0
        errors: list[str] = []
        stored = duplicates = 0
        with transaction.atomic():
            chunk: list = []
            numbers: list[int] = []  # the line number of each record in the chunk
            chunk_no = 0
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    records = decode_line(line)  # a record, or a whole batch as the agent's --dry-run prints
                    chunk.extend(records)
                    numbers.extend([number] * len(records))
                except msgspec.DecodeError as exc:
                    errors.append(f"line {number}: {exc}")
                    if len(errors) >= MAX_ERRORS:
                        break
                    continue
                if len(chunk) >= CHUNK:
                    receipt = self._store(chunk, numbers, digest, chunk_no, collector, errors)
                    if receipt is not None:
                        stored, duplicates = stored + receipt.records, duplicates + receipt.duplicate
                    chunk, numbers, chunk_no = [], [], chunk_no + 1
                    if progress:
                        self.stderr.write(f"\r{number * 100 // len(lines):3d}% {stored} records", ending="")
            if chunk and not errors:
                receipt = self._store(chunk, numbers, digest, chunk_no, collector, errors)
                if receipt is not None:
                    stored, duplicates = stored + receipt.records, duplicates + receipt.duplicate
            if errors:
                transaction.set_rollback(True)
                raise CommandError("nothing imported; the file has invalid records:\n" + "\n".join(errors))
        if progress:
            self.stderr.write("\r100%")
        note = f" ({duplicates} batches were already imported)" if duplicates else ""
        self.stdout.write(self.style.SUCCESS(f"stored {stored} records{note}"))

    def _store(self, chunk: list, numbers: list[int], digest: str, chunk_no: int, collector: str, errors: list[str]):
        """Store one chunk; records the server refuses (times out of bounds) join `errors` by line number."""
        try:
            return usage_records_import(records=chunk, source_digest=digest, chunk=chunk_no, collector=collector)
        except BatchInvalid as exc:
            errors.extend(f"line {numbers[e.index]}: {e.field}: {e.reason}" for e in exc.errors if e.index is not None)
            return None

    def _read(self, file: str) -> bytes:
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"{file}: no such file")
        return path.read_bytes()
