"""A bounded on-disk spool of batches waiting for the server.

Each batch is one file, written to a temporary name and renamed into place (os.replace), so a crash
leaves either the whole batch or none of it. Names sort by time, so replay goes oldest first. Over the
bound, the oldest batches are dropped and their records counted as dropped.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

SUFFIX = ".batch.gz"


@dataclass(frozen=True)
class Spooled:
    path: Path
    records: int

    def read(self) -> bytes:
        return self.path.read_bytes()


class Spool:
    def __init__(self, directory: Path, *, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        directory.mkdir(parents=True, exist_ok=True)
        self._sequence = 0
        for stale in directory.glob("*.tmp"):  # a write a crash cut short
            stale.unlink(missing_ok=True)

    def batches(self) -> list[Spooled]:
        """Oldest first. The record count is in the name, so counting never reads a batch."""
        out = []
        for path in sorted(self.directory.glob(f"*{SUFFIX}")):
            records = path.name.removesuffix(SUFFIX).rpartition("-")[2]
            out.append(Spooled(path, int(records) if records.isdigit() else 0))
        return out

    def put(self, body: bytes, records: int) -> int:
        """Store a gzipped batch; return the number of records dropped to keep within the bound."""
        self._sequence += 1
        name = f"{time.time_ns():020d}-{os.getpid()}-{self._sequence:06d}-{records}{SUFFIX}"
        temporary = self.directory / f".{name}.tmp"
        with temporary.open("wb") as handle:
            handle.write(body)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.directory / name)
        return self._trim()

    def remove(self, batch: Spooled) -> None:
        batch.path.unlink(missing_ok=True)

    def _trim(self) -> int:
        batches = self.batches()
        sizes = [b.path.stat().st_size for b in batches]
        total, dropped = sum(sizes), 0
        # The newest batch is always kept, even alone over the bound: it is the one just written.
        for batch, size in zip(batches[:-1], sizes[:-1], strict=True):
            if total <= self.max_bytes:
                break
            self.remove(batch)
            total -= size
            dropped += batch.records
        return dropped
