"""A job's runs in the record contract: a requeued Slurm job runs, waits holding nothing, and runs again (sacct
keeps a record per run). A record may carry them; only the runs are billed, never the waits between them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

MAX_RUNS = 64  # a job requeued more often than this is reported by its latest runs


class Run(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One run of a job: it held its GPUs from `start` to `end` (null: still running)."""

    start: Annotated[datetime, msgspec.Meta(tz=True)]
    end: Annotated[datetime, msgspec.Meta(tz=True)] | None = None


Runs = Annotated[list[Run], msgspec.Meta(max_length=MAX_RUNS)]


def runs_check(runs: list[Run], submit_time: datetime) -> None:
    """ValueError naming the field and the reason where a run is impossible."""
    for run in runs:
        if run.start < submit_time:
            raise ValueError("runs: a run starts before submit_time")
        if run.end is not None and run.end < run.start:
            raise ValueError("runs: a run ends before it starts")
