"""Sources of records: one module per source, one class each, one registry.

A source turns what a node can read (NVML, a dcgm-exporter page, a simulator) into records of the
ingest format. `read(now)` returns the records of one sampling round; it never raises for one GPU
or one process going away, only for the source as a whole being unusable (`SourceUnavailable`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from collectors.host import Host
from collectors.jobs import JobMapping
from collectors.records import Record

NAMES = ("nvml", "dcgm", "simulate")


class SourceUnavailable(Exception):
    """The source cannot run on this node (no driver, no exporter); the message says what to check."""


@dataclass
class SourceConfig:
    cluster: str
    node: str
    mapping: JobMapping
    host: Host = field(default_factory=Host)
    gpus: int = 8
    dcgm_url: str = "http://127.0.0.1:9400/metrics"


class Source(Protocol):
    name: str

    def read(self, now: datetime) -> list[Record]: ...

    def close(self) -> None: ...


def source_open(name: str, config: SourceConfig) -> Source:
    if name not in NAMES:
        raise ValueError(f"source: unknown {name!r} (known: {', '.join(NAMES)})")
    module = importlib.import_module(f"collectors.sources.{name}")
    return module.SOURCE.open(config)
