"""The agent loop: sample every interval, batch by size and age, send gzipped, spool what the server
does not take, replay the spool oldest first once it answers, and account for every record.

Counters are records, never batches: read = sent + spooled-and-not-yet-sent + dropped + pending.
"""

from __future__ import annotations

import gzip
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import BinaryIO

from collectors.records import Record, encode, new_batch
from collectors.sender import BatchRefused, Sender, SendFailed
from collectors.sources import Source
from collectors.spool import Spool

log = logging.getLogger("gpu-collector")


@dataclass
class Counters:
    read: int = 0
    sent: int = 0
    spooled: int = 0
    dropped: int = 0

    def line(self) -> str:
        return f"read={self.read} sent={self.sent} spooled={self.spooled} dropped={self.dropped}"


def gzip_batch(collector: str, records: list[Record]) -> bytes:
    return gzip.compress(encode(new_batch(collector, records)), compresslevel=6, mtime=0)


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
        self.pending: list[Record] = []
        self.pending_since = 0.0
        self.stopping = False

    # -- one round -------------------------------------------------------------------------------
    def sample(self) -> None:
        now = self.now()
        records = self.source.read(now)
        if self.jobs is not None:  # job records for what the samples show (and ids for samples only they know)
            records = [*self.jobs(records, now), *records]
        self.take(records)

    def take(self, records: Iterable[Record]) -> None:
        records = list(records)
        self.counters.read += len(records)
        if self.dry_run is not None:
            self.dry_run.write(b"".join(encode(r) + b"\n" for r in records))
            self.dry_run.flush()
            return
        if records and not self.pending:
            self.pending_since = self.clock()
        self.pending.extend(records)
        if len(self.pending) >= self.batch_size or (
            self.pending and self.clock() - self.pending_since >= self.batch_seconds
        ):
            self.flush()

    def flush(self) -> None:
        while self.pending:
            chunk, self.pending = self.pending[: self.batch_size], self.pending[self.batch_size :]
            self.deliver(gzip_batch(self.collector, chunk), len(chunk))

    # -- delivery --------------------------------------------------------------------------------
    def deliver(self, body: bytes, records: int) -> None:
        # Order matters: while older batches wait in the spool, a new one queues behind them.
        if self.sender is None or not self.replay():
            return self._spool(body, records)
        try:
            self.sender.post(body)
        except SendFailed as exc:
            log.warning("server unreachable (%s); spooling %d records", exc, records)
            return self._spool(body, records)
        except BatchRefused as exc:
            log.error("server refused a batch of %d records, dropped: %s", records, exc)
            self.counters.dropped += records
            return None
        self.counters.sent += records
        return None

    def replay(self) -> bool:
        """Send spooled batches oldest first, one try each; True when the spool is empty."""
        if self.spool is None or self.sender is None:
            return self.sender is not None
        for batch in self.spool.batches():
            try:
                self.sender.post_once(batch.read())
            except SendFailed:
                return False
            except BatchRefused as exc:
                log.error("server refused a spooled batch of %d records, dropped: %s", batch.records, exc)
                self.counters.dropped += batch.records
            else:
                self.counters.sent += batch.records
            self.spool.remove(batch)
        return True

    def _spool(self, body: bytes, records: int) -> None:
        if self.spool is None:
            log.error("no spool configured; %d records dropped", records)
            self.counters.dropped += records
            return
        self.counters.spooled += records
        dropped = self.spool.put(body, records)
        if dropped:
            log.warning("spool over its bound; dropped the oldest %d records", dropped)
            self.counters.dropped += dropped

    # -- the loop --------------------------------------------------------------------------------
    def report(self, when: str = "") -> None:
        log.info("%s%s", self.counters.line(), f" ({when})" if when else "")

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
            self.source.close()
            self.report("exit")
        return self.counters
