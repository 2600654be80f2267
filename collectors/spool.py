"""A bounded on-disk spool of batches waiting for the server, and the round log of records not yet batched.

Each batch is one file, written to a temporary name, fsynced and renamed into place (os.replace), so a crash
leaves either the whole batch or none of it. Names sort by time, so replay goes oldest first. Over the bound, the
oldest batches are dropped and their records counted as dropped.

Every round the agent reads is appended to the round log (`rounds.log` in the spool) and fsynced before it counts
as read; a batch is cut from the log, stored in the spool, and only then is the log emptied. A SIGKILL therefore
loses at most the round being read. A batch's id derives from the log's id and the batch's place in it, and its
file name from both, so a batch cut again after a crash (log not yet emptied) is the same batch, byte for byte,
in the same file: nothing is doubled, and the server would recognise the id anyway.

A batch the server refuses for what it holds moves to the dead-letter folder (`dead/` in the spool) with the
server's error beside it (`<batch>.error.txt`), never deleted by the agent: an operator reads, fixes or removes it.
That folder is bounded too; once full it keeps what it holds and says so, and a newly refused batch is dropped.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import time
import uuid
import zlib
from dataclasses import dataclass
from io import BufferedWriter
from pathlib import Path

SUFFIX = ".batch.gz"
ROUNDS = "rounds.log"
DEAD = "dead"
ERROR_SUFFIX = ".error.txt"
FRAME = struct.Struct(">II")  # payload length, CRC-32 of the payload

log = logging.getLogger("gpu-collector")


@dataclass(frozen=True)
class Spooled:
    path: Path
    records: int

    def read(self) -> bytes:
        return self.path.read_bytes()


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class RoundLog:
    """Records read but not yet cut into a batch, as their JSON lines, one frame per round.

    The first frame is the header: the log's id (the batches cut from it derive their ids from it) and when it
    began. A torn last frame, from a crash while appending, is skipped with a log line on opening.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.id: uuid.UUID | None = None
        self.started_ns = 0
        self.lines: list[bytes] = []
        self._handle: BufferedWriter | None = None
        if path.exists():
            self._load()

    def _load(self) -> None:
        data = self.path.read_bytes()
        frames, offset = [], 0
        while offset + FRAME.size <= len(data):
            length, crc = FRAME.unpack_from(data, offset)
            payload = data[offset + FRAME.size : offset + FRAME.size + length]
            if len(payload) < length or zlib.crc32(payload) != crc:
                break
            frames.append(payload)
            offset += FRAME.size + length
        if offset < len(data):
            log.warning("round log %s: skipped a torn last round (%d bytes)", self.path, len(data) - offset)
            with self.path.open("r+b") as handle:
                handle.truncate(offset)
                os.fsync(handle.fileno())
        if not frames:
            self.path.unlink()
            return
        header = json.loads(frames[0])
        self.id, self.started_ns = uuid.UUID(header["id"]), int(header["started_ns"])
        for frame in frames[1:]:
            self.lines.extend(frame.split(b"\n"))

    def _write(self, payload: bytes) -> None:
        assert self._handle is not None
        self._handle.write(FRAME.pack(len(payload), zlib.crc32(payload)) + payload)

    def append(self, lines: list[bytes]) -> None:
        """Add a round's records; durable when this returns."""
        if not lines:
            return
        created = False
        if self._handle is None:
            created = self.id is None
            self._handle = self.path.open("ab")
            if created:
                self.id, self.started_ns = uuid.uuid4(), time.time_ns()
                self._write(json.dumps({"id": str(self.id), "started_ns": self.started_ns}).encode())
        self._write(b"\n".join(lines))
        self._handle.flush()
        os.fsync(self._handle.fileno())
        if created:
            _fsync_directory(self.path.parent)  # the new file's name is durable too
        self.lines.extend(lines)

    def reset(self) -> None:
        """Forget every record: they are in the spool now."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        self.path.unlink(missing_ok=True)
        _fsync_directory(self.path.parent)
        self.id, self.started_ns, self.lines = None, 0, []

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _records(path: Path) -> int:
    records = path.name.removesuffix(SUFFIX).rpartition("-")[2]
    return int(records) if records.isdigit() else 0


class DeadLetterFull(Exception):
    """The dead-letter folder is at its bound: it keeps the batches it holds, and takes no more."""


class Spool:
    def __init__(
        self, directory: Path, *, max_bytes: int = 256 * 1024 * 1024, dead_max_bytes: int = 64 * 1024 * 1024
    ) -> None:
        self.directory = directory
        self.max_bytes, self.dead_max_bytes = max_bytes, dead_max_bytes
        self.dead = directory / DEAD
        directory.mkdir(parents=True, exist_ok=True)
        self._sequence = 0
        for stale in directory.glob("*.tmp"):  # a write a crash cut short
            stale.unlink(missing_ok=True)
        self.rounds = RoundLog(directory / ROUNDS)

    def batches(self) -> list[Spooled]:
        """Oldest first. The record count is in the name, so counting never reads a batch."""
        return [Spooled(path, _records(path)) for path in sorted(self.directory.glob(f"*{SUFFIX}"))]

    def put(self, body: bytes, records: int, *, key: str | None = None) -> int:
        """Store a gzipped batch; return the number of records dropped to keep within the bound.

        With a key, the file is named by it: storing the same batch again replaces the file.
        """
        self._sequence += 1
        stem = key or f"{time.time_ns():020d}-{os.getpid()}-{self._sequence:06d}"
        name = f"{stem}-{records}{SUFFIX}"
        temporary = self.directory / f".{name}.tmp"
        with temporary.open("wb") as handle:
            handle.write(body)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.directory / name)
        _fsync_directory(self.directory)
        return self._trim()

    def remove(self, batch: Spooled) -> None:
        batch.path.unlink(missing_ok=True)

    def dead_letters(self) -> list[Spooled]:
        """The batches the server refused for their content, oldest first."""
        if not self.dead.is_dir():
            return []
        return [Spooled(path, _records(path)) for path in sorted(self.dead.glob(f"*{SUFFIX}"))]

    def bury(self, batch: Spooled, error: str) -> Path:
        """Move a batch the server refused for its content to the dead-letter folder, its error beside it; the
        new path. Raises DeadLetterFull (the batch stays where it is) when the folder holds `dead_max_bytes`."""
        self.dead.mkdir(exist_ok=True)
        held = sum(path.stat().st_size for path in self.dead.iterdir() if path.is_file())
        if held + batch.path.stat().st_size > self.dead_max_bytes:
            raise DeadLetterFull(f"{self.dead} holds {held} bytes of its {self.dead_max_bytes}")
        target = self.dead / batch.path.name
        note = target.with_name(target.name.removesuffix(SUFFIX) + ERROR_SUFFIX)
        with note.open("w") as handle:
            handle.write(f"{error}\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(batch.path, target)
        _fsync_directory(self.dead)
        _fsync_directory(self.directory)
        return target

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
