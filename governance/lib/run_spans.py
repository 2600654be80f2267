"""A job's runs: when it held its GPUs. A requeued Slurm job runs, waits (held nothing), and runs again; it is billed
for its runs, never for the waits between them.

A run is (start, end), end None while it runs. Stored on the job as [[start, end or null], ...] in ISO 8601, and
only where the runs say more than the job's start and end (one run from start_time to end_time stores nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

Span = tuple[datetime, datetime | None]


def runs_merge(known: Iterable[Span], reported: Iterable[Span], *, end: datetime | None) -> list[Span]:
    """The runs known so far and those a record reports, by start: a known end is never erased by an unknown one.
    A job runs once at a time, so a run still open (or said to end) after a later one starts ended by then; a job
    that has ended (`end`) holds nothing after its end."""
    by_start: dict[datetime, datetime | None] = {}
    for start, stop in (*known, *reported):
        if stop is not None or start not in by_start:
            by_start[start] = stop
    starts = sorted(by_start)
    out: list[Span] = []
    for i, start in enumerate(starts):
        stop = by_start[start]
        if i + 1 < len(starts) and (stop is None or stop > starts[i + 1]):
            stop = starts[i + 1]
        if end is not None:
            if start >= end:
                continue
            stop = end if stop is None else min(stop, end)
        out.append((start, stop))
    return out


def runs_of(stored: Sequence[Sequence[str | None]], start: datetime | None, end: datetime | None) -> list[Span]:
    """A job's runs from its stored column, or its one run from start to end where it stores none."""
    if stored:
        return [(datetime.fromisoformat(str(a)), datetime.fromisoformat(b) if b else None) for a, b in stored]
    return [(start, end)] if start is not None else []


def runs_stored(runs: Sequence[Span], start: datetime | None, end: datetime | None) -> list[list[str | None]]:
    """What the job stores of its runs: nothing where they are its one run from start to end."""
    if len(runs) <= 1 and list(runs) == ([(start, end)] if start is not None else []):
        return []
    return [[a.isoformat(), b.isoformat() if b else None] for a, b in runs]


def held_within(runs: Sequence[Span] | None, lo: datetime, hi: datetime) -> list[tuple[datetime, datetime]]:
    """The stretches of lo..hi the runs held (an open run holds up to hi); None: the whole of lo..hi."""
    if runs is None:
        return [(lo, hi)] if hi > lo else []
    out = []
    for start, stop in runs:
        a, b = max(lo, start), min(hi, stop or hi)
        if b > a:
            out.append((a, b))
    return out
