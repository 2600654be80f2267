"""The agent loop: sample every interval, log every round to disk before it counts as read, cut batches by size
and age, send them gzipped, spool what the server does not take, replay the spool oldest first once it answers,
and account for every record.

Counters are records, never batches: read = sent + spooled-and-not-yet-sent + dropped + dead + pending. With a
spool, a round is in the spool's round log (collectors/spool.py) before it counts as read, and a batch is in the
spool before it is sent, so a SIGKILL loses at most the round being read, and a restart sends nothing twice.

What the server refuses is never lost to configuration: a batch refused because of the token (unknown, expired,
not allowed, bound to other clusters) stays in the spool, and every round and every report says why, until an
admin fixes the token; a batch refused for what it holds moves to the spool's dead-letter folder with the
server's error (`dead` counts its records).
"""

from __future__ import annotations

import gzip
import logging
import math
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import BinaryIO

from collectors.records import Record, encode, new_batch
from collectors.sender import BatchRefused, Sender, SendFailed, TokenRefused
from collectors.sources import Source
from collectors.spool import DeadLetterFull, RoundLog, Spool, Spooled

log = logging.getLogger("gpu-collector")


@dataclass
class Counters:
    read: int = 0
    sent: int = 0
    spooled: int = 0
    dropped: int = 0
    dead: int = 0

    def line(self) -> str:
        return f"read={self.read} sent={self.sent} spooled={self.spooled} dropped={self.dropped} dead={self.dead}"


def gzip_batch(collector: str, records: list[Record]) -> bytes:
    return gzip.compress(encode(new_batch(collector, records)), compresslevel=6, mtime=0)


def batch_json(collector: str, batch_id: uuid.UUID, lines: list[bytes]) -> bytes:
    """A batch as the ingest API takes it, of records already encoded (JSON each), on one line."""
    head = b'{"batch_id":"%s","collector":%s,"records":[' % (str(batch_id).encode(), encode(collector))
    return head + b",".join(lines) + b"]}"


def gzip_lines(collector: str, batch_id: uuid.UUID, lines: list[bytes]) -> bytes:
    """A gzipped batch of records already encoded (JSON each): the same records give the same bytes."""
    return gzip.compress(batch_json(collector, batch_id, lines), compresslevel=6, mtime=0)


class MemoryRounds:
    """The round log of an agent with no spool: its records wait in memory, and die with the process."""

    def __init__(self) -> None:
        self.id: uuid.UUID | None = None
        self.started_ns = 0
        self.lines: list[bytes] = []

    def append(self, lines: list[bytes]) -> None:
        if lines and self.id is None:
            self.id, self.started_ns = uuid.uuid4(), time.time_ns()
        self.lines.extend(lines)

    def reset(self) -> None:
        self.id, self.started_ns, self.lines = None, 0, []

    def close(self) -> None:
        return None


class Agent:
    def __init__(
        self, *, source: Source, collector: str, sender: Sender | None = None, spool: Spool | None = None,
        interval: float = 60.0, batch_size: int = 5000, batch_seconds: float = 60.0, report_seconds: float = 300.0,
        jobs: Callable[[list[Record], datetime], list[Record]] | None = None, dry_run: BinaryIO | None = None,
        clock: Callable[[], float] = time.monotonic, now: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:  # fmt: skip
        self.source, self.collector, self.sender, self.spool = source, collector, sender, spool
        self.interval, self.batch_size, self.batch_seconds = interval, batch_size, batch_seconds
        self.report_seconds = report_seconds
        self.jobs, self.dry_run = jobs, dry_run
        self.clock, self.now, self.sleep = clock, now, sleep
        self.counters = Counters()
        self.token_refused: str | None = None  # the server's word while it refuses the token; None once it takes it
        self.rounds: RoundLog | MemoryRounds = spool.rounds if spool is not None else MemoryRounds()
        # Rounds a previous run logged and never batched (it was killed) are due at once.
        self.pending_since = -math.inf if self.rounds.lines else 0.0
        if self.rounds.lines:
            log.info("round log: %d records from before a restart, batched now", len(self.rounds.lines))
        self.stopping = False

    @property
    def pending(self) -> int:
        """Records read and not yet cut into a batch."""
        return len(self.rounds.lines)

    # -- one round -------------------------------------------------------------------------------
    def sample(self) -> None:
        now = self.now()
        records = self.source.read(now)
        if self.jobs is not None:  # job records for what the samples show (and ids for samples only they know)
            records = [*self.jobs(records, now), *records]
        self.take(records)

    def take(self, records: Iterable[Record]) -> None:
        records = list(records)
        if self.dry_run is not None:  # each round's records as the batches the API would take, one a line
            self.counters.read += len(records)
            lines = [encode(r) for r in records]
            chunks = [lines[i : i + self.batch_size] for i in range(0, len(lines), self.batch_size)]
            self.dry_run.write(b"".join(batch_json(self.collector, uuid.uuid4(), c) + b"\n" for c in chunks))
            self.dry_run.flush()
            return
        if records and not self.pending:
            self.pending_since = self.clock()
        self.rounds.append([encode(r) for r in records])  # durable (with a spool) before it counts as read
        self.counters.read += len(records)
        if self.pending >= self.batch_size or (
            self.pending and self.clock() - self.pending_since >= self.batch_seconds
        ):
            self.flush()

    def flush(self) -> None:
        """Cut the logged records into batches; store them in the spool (or, with none, send them) and send."""
        lines, log_id = self.rounds.lines, self.rounds.id
        if not lines or log_id is None:
            return
        chunks = [lines[i : i + self.batch_size] for i in range(0, len(lines), self.batch_size)]
        bodies = [(gzip_lines(self.collector, uuid.uuid5(log_id, str(n)), c), len(c)) for n, c in enumerate(chunks)]
        if self.spool is None:
            self.rounds.reset()
            for body, records in bodies:
                self._send_unspooled(body, records)
            return
        fresh = set()
        for n, (body, records) in enumerate(bodies):
            key = f"{self.rounds.started_ns:020d}-{log_id.hex}-{n:04d}"
            dropped = self.spool.put(body, records, key=key)
            if dropped:
                log.warning("spool over its bound; dropped the oldest %d records", dropped)
                self.counters.dropped += dropped
            fresh.add(key)
        self.rounds.reset()  # only now: until here a crash cuts the same batches again, into the same files
        self.deliver(self.spool, fresh)

    # -- delivery --------------------------------------------------------------------------------
    def deliver(self, spool: Spool, fresh: set[str]) -> None:
        """Send the spool oldest first; the records of the fresh batches that stay in it count as spooled."""

        def waiting() -> int:
            return sum(b.records for b in spool.batches() if b.path.name.rpartition("-")[0] in fresh)

        if self.sender is None:
            self.counters.spooled += waiting()
            return
        batches = spool.batches()
        # Nothing older waits: send now, with the sender's retries. Older batches go first, one try each.
        older = any(b.path.name.rpartition("-")[0] not in fresh for b in batches)
        post = self.sender.post_once if older else self.sender.post
        for batch in batches:
            if not self._send(spool, batch, post):
                left = waiting()
                if left and self.token_refused is None:
                    log.warning("server unreachable; %d records wait in the spool", left)
                self.counters.spooled += left
                return

    def _send(self, spool: Spool, batch: Spooled, post: Callable[[bytes], None]) -> bool:
        """Send one spooled batch; False when the server is unreachable or refuses the token (the batch stays)."""
        try:
            post(batch.read())
        except TokenRefused as exc:
            self.token_refused = str(exc)
            held = sum(b.records for b in spool.batches())
            log.error("server refuses the token; %d records kept in the spool until it is fixed: %s", held, exc)
            return False
        except SendFailed as exc:
            log.info("send failed (%s)", exc)
            return False
        except BatchRefused as exc:
            self.token_refused = None
            self._bury(spool, batch, str(exc))
            return True
        self.token_refused = None
        self.counters.sent += batch.records
        spool.remove(batch)
        return True

    def _bury(self, spool: Spool, batch: Spooled, error: str) -> None:
        try:
            path = spool.bury(batch, error)
        except DeadLetterFull as exc:
            log.error(
                "dead-letter folder full (%s): it keeps what it holds; a batch of %d records the server refused"
                " was dropped: %s", exc, batch.records, error,
            )  # fmt: skip
            spool.remove(batch)
            self.counters.dropped += batch.records
            return
        log.error("server refused a batch of %d records for its content; kept in %s: %s", batch.records, path, error)
        self.counters.dead += batch.records

    def _send_unspooled(self, body: bytes, records: int) -> None:
        if self.sender is None:
            return
        try:
            self.sender.post(body)
        except TokenRefused as exc:
            self.token_refused = str(exc)
            log.error("server refuses the token and no spool configured; %d records dropped: %s", records, exc)
            self.counters.dropped += records
        except SendFailed as exc:
            log.error("server unreachable (%s) and no spool configured; %d records dropped", exc, records)
            self.counters.dropped += records
        except BatchRefused as exc:
            log.error("server refused a batch of %d records, dropped: %s", records, exc)
            self.counters.dropped += records
        else:
            self.token_refused = None
            self.counters.sent += records

    def replay(self) -> bool:
        """Send spooled batches oldest first, one try each; True when the spool is empty."""
        if self.spool is None or self.sender is None:
            return self.sender is not None
        spool, post = self.spool, self.sender.post_once
        return all(self._send(spool, batch, post) for batch in spool.batches())

    # -- the loop --------------------------------------------------------------------------------
    def report(self, when: str = "") -> None:
        line = self.counters.line() + (f" ({when})" if when else "")
        if self.token_refused is not None:
            log.error("%s; the server refuses the token, batches wait in the spool: %s", line, self.token_refused)
        else:
            log.info("%s", line)

    def stop(self, *_: object) -> None:
        self.stopping = True

    def run(self, *, once: bool = False) -> Counters:
        next_round = self.clock()
        last_report = next_round
        try:
            while not self.stopping:
                self.sample()
                if once:
                    break
                if not self.pending and self.spool is not None and self.spool.batches():
                    self.replay()
                if self.clock() - last_report >= self.report_seconds:
                    self.report()
                    last_report = self.clock()
                next_round += self.interval
                while not self.stopping and (left := next_round - self.clock()) > 0:
                    self.sleep(min(left, 0.5))  # short naps: SIGTERM is seen within half a second
        finally:
            self.flush()
            self.rounds.close()
            self.source.close()
            self.report("exit")
        return self.counters
