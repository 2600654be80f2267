"""A batch prepared for writing: parsed once, on the web side, and never again.

The web process decodes and validates a batch with msgspec (collectors.records.decode_batch) and turns it,
in the same request, into what the writer needs:

- a small header: the job records, each GPU's facts as its latest sample gave them, and the job keys the
  samples name;
- the samples as rows of the staging table, which name their GPU and job by position in the header
  (1-based; 0 and NULL mean "no job") because database ids are the worker's to resolve.

On PostgreSQL the inbox stores exactly this (``IngestBatch.Format.PREPARED``): the header as msgpack and
the rows in PostgreSQL's binary COPY format. The worker decodes the header, resolves ids, and streams the
rows into its staging table untouched: it runs no Python per sample, and no process parses a batch twice.
On SQLite the inbox keeps the JSON body and the worker prepares it after decoding it (the simple path).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

import msgspec
import psycopg
from psycopg.adapt import Transformer
from psycopg.copy import Copy, Writer
from psycopg.pq import Format

from collectors.records import Batch, JobRecord, SampleRecord

MAGIC = b"GGP2"
# Payloads stored by an earlier release, still in the inbox at an upgrade: their magic and how many of READINGS
# their rows carry (a release appends its new readings at the end, so the first ones are the same columns).
EARLIER = {b"GGP1": 14}
_HEADER_LENGTH = struct.Struct(">I")

# What a sample row carries after its time, GPU and job (usage_sample's columns too), with COPY types.
READINGS = (
    ("sm_util", "float8"), ("mem_used_mib", "float8"), ("mem_total_mib", "float8"), ("power_w", "float8"),
    ("gpu_numa_node", "int2"), ("cpu_numa_mask", "int8"), ("mem_util", "float8"), ("tensor_active", "float8"),
    ("dram_active", "float8"), ("pcie_rx_mibps", "float8"), ("pcie_tx_mibps", "float8"),
    ("nvlink_mibps", "float8"), ("host_cpu_util", "float8"), ("io_wait", "float8"), ("job_sm_util", "float8"),
)  # fmt: skip
READING_COLUMNS = tuple(name for name, _ in READINGS)
READING_TYPES = tuple(kind for _, kind in READINGS)

# The staging table's columns, in row order: a sample, its GPU and job named by header position.
STAGE_COLUMNS = ("ts", "gpu_ix", "job_ix", *READING_COLUMNS)
STAGE_TYPES = ("timestamptz", "int4", "int4", *READING_TYPES)


class GpuFacts(msgspec.Struct, array_like=True):
    """One GPU as the batch saw it: the facts of its latest sample, and when it was first and last seen."""

    cluster: str
    uuid: str
    node: str
    index: int
    model: str
    mem_total_mib: float | None
    numa_node: int | None
    mig_profile: str
    first_seen: datetime
    last_seen: datetime


class Header(msgspec.Struct, array_like=True):
    jobs: list[JobRecord]
    gpus: list[GpuFacts]
    job_keys: list[tuple[str, str, str]]  # (cluster, job id, GPU model of its first sample), as rows name them
    samples: int


@dataclass(frozen=True)
class Prepared:
    header: Header
    rows: list[tuple] | memoryview  # staging rows, or the same rows already in binary COPY format
    readings: int = len(READINGS)  # how many of READINGS each row carries (fewer in an earlier release's payload)
    # (cluster, GPU uuid) -> (position in the batch's records, record) of each GPU's first sample, for the fleet's
    # bounds (governance/usage/fleet_growth.py); what `prepare` found on its way, never stored.
    first_samples: dict[tuple[str, str], tuple[int, SampleRecord]] = field(default_factory=dict)


_header_encoder = msgspec.msgpack.Encoder()
_header_decoder = msgspec.msgpack.Decoder(Header)


class PreparedInvalid(Exception):
    """A stored payload is not a prepared batch this version can read."""


def prepare(batch: Batch) -> Prepared:
    """One pass over the records: GPU facts (latest sample wins), job keys, and a staging row per sample."""
    jobs: list[JobRecord] = []
    gpu_ix: dict[tuple[str, str], int] = {}
    latest: list[SampleRecord] = []
    first: list[datetime] = []
    first_samples: dict[tuple[str, str], tuple[int, SampleRecord]] = {}
    job_ix: dict[tuple[str, str], int] = {}
    job_models: list[str] = []
    rows: list[tuple] = []
    for i, r in enumerate(batch.records):  # once per record: keep it lean
        if type(r) is not SampleRecord:
            jobs.append(cast(JobRecord, r))
            continue
        key = (r.cluster, r.gpu_uuid)
        g = gpu_ix.get(key)
        if g is None:
            first_samples[key] = (i, r)
            latest.append(r)
            first.append(r.ts)
            g = gpu_ix[key] = len(latest)
        elif r.ts >= latest[g - 1].ts:
            latest[g - 1] = r
        elif r.ts < first[g - 1]:
            first[g - 1] = r.ts
        if r.job_id is None:
            j = None
        else:
            jkey = (r.cluster, r.job_id)
            j = job_ix.get(jkey)
            if j is None:
                j = job_ix[jkey] = len(job_ix) + 1
                job_models.append(r.gpu_model)
        mask = None
        if r.job_cpu_numa_nodes is not None:
            mask = 0
            for node in r.job_cpu_numa_nodes:
                mask |= 1 << node
        rows.append((
            r.ts, g, j, r.sm_util, r.mem_used_mib, r.mem_total_mib, r.power_w, r.gpu_numa_node, mask,
            r.mem_util, r.tensor_active, r.dram_active, r.pcie_rx_mibps, r.pcie_tx_mibps, r.nvlink_mibps,
            r.host_cpu_util, r.io_wait, r.job_sm_util,
        ))  # fmt: skip
    gpus: list[GpuFacts] = []
    for s, seen in zip(latest, first, strict=True):
        gpus.append(GpuFacts(
            s.cluster, s.gpu_uuid, s.node, s.gpu_index, s.gpu_model, s.mem_total_mib, s.gpu_numa_node,
            s.mig_profile or "", seen, s.ts,
        ))  # fmt: skip
    job_keys = [(c, j, model) for (c, j), model in zip(job_ix, job_models, strict=True)]
    return Prepared(
        Header(jobs=jobs, gpus=gpus, job_keys=job_keys, samples=len(rows)), rows, first_samples=first_samples
    )


try:
    # psycopg's own row formatter, in C with psycopg-binary: what `Copy.write_row` calls for each row, without the two
    # Python frames that call adds per row (half of what encoding a 10,000-row batch cost). A private name: where a
    # psycopg release moves it, `encode` takes the public path (tests/usage/test_prepared.py compares the two).
    from psycopg._copy_base import format_row_binary as _format_row_binary
except ImportError:  # pragma: no cover - depends on the psycopg release
    _format_row_binary = None

# Binary COPY's file header (signature, flags, header extension length) and trailer.
COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\0" + bytes(8)
COPY_TRAILER = b"\xff\xff"


class _Collect(Writer):
    """Keeps the buffers psycopg hands over (each a new object, never reused by it) and joins them once: a BytesIO
    growing by 32 KiB writes cost more than the rows' formatting."""

    def __init__(self) -> None:
        self.chunks: list[bytes | bytearray | memoryview] = []

    def write(self, data) -> None:
        self.chunks.append(data)

    def getvalue(self) -> bytes:
        return b"".join(self.chunks)


def encode(prepared: Prepared, connection: psycopg.Connection, *, public_path: bool = False) -> bytes:
    """MAGIC, the header's length and msgpack, then the rows in binary COPY format (PostgreSQL).

    The connection only lends psycopg its type adapters; nothing is sent to the server. `public_path`: through
    psycopg's `Copy` object, row by row (what the faster path must equal).
    """
    header = _header_encoder.encode(prepared.header)
    rows = prepared.rows
    assert not isinstance(rows, memoryview)  # what prepare() made, not rows already encoded
    start = MAGIC + _HEADER_LENGTH.pack(len(header)) + header
    if _format_row_binary is not None and not public_path:
        transformer = Transformer(connection)
        registry = connection.adapters.types
        transformer.set_dumper_types([registry.get_oid(t) for t in STAGE_TYPES], Format.BINARY)
        out = bytearray(start + COPY_SIGNATURE)
        for row in rows:
            _format_row_binary(row, transformer, out)
        out += COPY_TRAILER
        return bytes(out)
    writer = _Collect()
    writer.write(start)
    with psycopg.Cursor(connection) as cursor, Copy(cursor, binary=True, writer=writer) as copy:
        copy.set_types(STAGE_TYPES)
        for row in rows:
            copy.write_row(row)
    return writer.getvalue()


def decode(payload: bytes | memoryview) -> Prepared:
    """Split a stored payload into its header (decoded) and its COPY rows (left as bytes)."""
    view = memoryview(payload)
    start = len(MAGIC) + _HEADER_LENGTH.size
    magic = bytes(view[: len(MAGIC)])
    if (magic != MAGIC and magic not in EARLIER) or len(view) < start:
        raise PreparedInvalid("not a prepared batch (bad magic)")
    (length,) = _HEADER_LENGTH.unpack(view[len(MAGIC) : start])
    try:
        header = _header_decoder.decode(view[start : start + length])
    except msgspec.DecodeError as exc:
        raise PreparedInvalid(f"unreadable header: {exc}") from None
    return Prepared(header, view[start + length :], EARLIER.get(magic, len(READINGS)))


def rows_with_ids(rows: Sequence[tuple], gpu_ids: Sequence[int], job_ids: Sequence[int]) -> list[tuple]:
    """Staging rows with header positions replaced by database ids (the SQLite path)."""
    return [(r[0], gpu_ids[r[1] - 1], job_ids[r[2] - 1] if r[2] else None, *r[3:]) for r in rows]
