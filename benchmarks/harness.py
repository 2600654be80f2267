"""What every benchmark shares: a throwaway PostgreSQL database, `name: value` output, timing and ratios.

The bench database is DATABASE_URL's name + `_bench`, created with the test-database machinery (migrated from
scratch) and dropped at the end, so a bench never touches real data. Each area runs on an emptied database.
"""

from __future__ import annotations

import importlib
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import TextIO

from django.core.management import call_command
from django.db import connection

Out = Callable[[str, object], None]

# Ingest first (it measures a cold start of the pipeline on an empty database), then the rest. Each area answers
# to its module's name and to the app it measures (`--only usage` runs the ingest bench, as it did).
AREAS: dict[str, tuple[str, ...]] = {
    "ingest": ("usage", "chargeback"),
    "collectors": (),
    "costs": (),
    "pricing": ("reprice", "findings", "close"),
    "pages": ("dashboard", "overview"),
    "storage": ("scaling",),
    "fleet": ("load",),
}

NOT_POSTGRESQL = "bench runs against PostgreSQL: set DATABASE_URL=postgres://..."


class BenchError(Exception):
    pass


def areas_selected(only: Sequence[str] = ()) -> list[str]:
    """The areas to run, in order: all, or those whose name or alias contains one of `only`."""
    return [
        area
        for area, aliases in AREAS.items()
        if not only or any(part in name for part in only for name in (area, *aliases))
    ]


def printer(stream: TextIO = sys.stdout) -> Out:
    """One `name: value` line per figure, flushed at once (a long bench shows its figures as they come)."""

    def out(name: str, value: object) -> None:
        stream.write(f"{name}: {value}\n")
        stream.flush()

    return out


def median_ms(*fns: Callable[[], object], repeats: int) -> list[float]:
    """Median time of each function over `repeats` rounds, the functions taking turns within a round.

    Taking turns, a busy moment of a shared machine slows all of them rather than whichever happened to run
    during it; the median, unlike the best, is what a reader waits and moves little from run to run.
    """
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, spent in zip(fns, times, strict=True):
            started = time.perf_counter()
            fn()
            spent.append((time.perf_counter() - started) * 1000)
    return [statistics.median(spent) for spent in times]


def ratio(numerator: float, denominator: float, digits: int = 2) -> float:
    """numerator / denominator rounded, 0.0 when the denominator is 0 (a figure too small to measure)."""
    return round(numerator / denominator, digits) if denominator else 0.0


def run(only: Sequence[str] = (), *, keep_db: bool = False, out: Out | None = None, log: TextIO = sys.stderr) -> int:
    """Run the selected areas on a throwaway database; the number of areas that failed (each failure is logged)."""
    if connection.vendor != "postgresql":
        raise BenchError(NOT_POSTGRESQL)
    out = out or printer()
    connection.settings_dict.setdefault("TEST", {})["NAME"] = f"{connection.settings_dict['NAME']}_bench"
    original = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    failures = 0
    try:
        for area in areas_selected(only):
            call_command("flush", interactive=False, verbosity=0)
            started = time.perf_counter()
            try:
                importlib.import_module(f"benchmarks.{area}").run(out)
            except Exception:
                failures += 1
                log.write(f"# {area} failed:\n{traceback.format_exc()}\n")
            log.write(f"# {area}: {time.perf_counter() - started:.1f} s\n")
    finally:
        if not keep_db:
            connection.creation.destroy_test_db(original, verbosity=0)
    return failures
