"""The ingest record format: one definition shared by the agent and the server.

A batch is {"batch_id": uuid, "collector": name, "records": [...]}, each record a job or a sample
(see DESIGN.md). Decoding and validation happen in one msgspec pass; this module imports no Django.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

Percent = Annotated[float, msgspec.Meta(ge=0, le=100)]
NonNegative = Annotated[float, msgspec.Meta(ge=0)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
UtcTime = Annotated[datetime, msgspec.Meta(tz=True)]

JobState = Literal[
    "pending", "running", "completed", "failed", "cancelled", "timeout", "preempted", "node_fail", "out_of_memory"
]
TERMINAL_STATES = frozenset({"completed", "failed", "cancelled", "timeout", "preempted", "node_fail", "out_of_memory"})


# gc=False: records hold only scalars, strings and flat lists or dicts of them, so they can form no reference
# cycle; untracked by the garbage collector, the tens of thousands a batch decodes into cost less to create
# and to free.
class JobRecord(msgspec.Struct, tag_field="kind", tag="job", forbid_unknown_fields=True, omit_defaults=True, gc=False):
    cluster: Name
    job_id: Name
    user: Name
    project: Name
    gpus: Annotated[int, msgspec.Meta(ge=0, le=100_000)] | None  # null: the source does not know the count
    submit_time: UtcTime
    team: Name | None = None
    gpu_model: Name | None = None
    start_time: UtcTime | None = None
    end_time: UtcTime | None = None
    state: JobState = "running"
    labels: dict[str, str] = {}

    def __post_init__(self) -> None:
        if self.start_time is not None and self.start_time < self.submit_time:
            raise ValueError("start_time: is before submit_time")
        if self.end_time is not None:
            if self.start_time is None:
                raise ValueError("start_time: is required when end_time is set")
            if self.end_time < self.start_time:
                raise ValueError("end_time: is before start_time")


class SampleRecord(
    msgspec.Struct, tag_field="kind", tag="sample", forbid_unknown_fields=True, omit_defaults=True, gc=False
):
    cluster: Name
    node: Name
    gpu_uuid: Name
    gpu_index: NonNegativeInt
    gpu_model: Name
    ts: UtcTime
    # Every metric may be unknown (null): a trimmed exporter, a GPU that does not report it. Never zero instead.
    sm_util: Percent | None = None
    mem_used_mib: NonNegative | None = None
    mem_total_mib: Annotated[float, msgspec.Meta(gt=0)] | None = None
    job_id: Name | None = None
    power_w: NonNegative | None = None
    gpu_numa_node: NonNegativeInt | None = None
    job_cpu_numa_nodes: list[NonNegativeInt] | None = None
    mig_profile: Name | None = None
    mem_util: Percent | None = None
    tensor_active: Percent | None = None
    dram_active: Percent | None = None
    pcie_rx_mibps: NonNegative | None = None
    pcie_tx_mibps: NonNegative | None = None
    nvlink_mibps: NonNegative | None = None
    host_cpu_util: Percent | None = None
    io_wait: Percent | None = None

    def __post_init__(self) -> None:
        if self.mem_used_mib is not None and self.mem_total_mib is not None and self.mem_used_mib > self.mem_total_mib:
            raise ValueError("mem_used_mib: is larger than mem_total_mib")


Record = JobRecord | SampleRecord


class Batch(msgspec.Struct, forbid_unknown_fields=True):
    batch_id: uuid.UUID
    collector: Name
    records: list[Record]


class _LooseBatch(msgspec.Struct):
    batch_id: uuid.UUID
    collector: Name
    records: list[msgspec.Raw]


class RecordError(msgspec.Struct):
    index: int | None
    field: str | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)


class BatchInvalid(Exception):
    """The batch breaks the format; errors name each bad record's index and field."""

    def __init__(self, errors: list[RecordError]) -> None:
        super().__init__("; ".join(f"record {e.index} {e.field}: {e.reason}" for e in errors))
        self.errors = errors


_batch_decoder = msgspec.json.Decoder(Batch)
_loose_decoder = msgspec.json.Decoder(_LooseBatch)
_record_decoder = msgspec.json.Decoder(Record)
_encoder = msgspec.json.Encoder()

MAX_REPORTED_ERRORS = 100


def _split_path(message: str) -> tuple[str, str | None]:
    # msgspec reports "Expected `int`, got `str` - at `$.records[3].gpus`".
    reason, sep, path = message.rpartition(" - at `")
    if not sep:
        return message, None
    return reason, path.rstrip("`").removeprefix("$")


_NAMED_FIELD = re.compile(r"^Object (?:missing required|contains unknown) field `(?P<field>[^`]+)`$")
_OWN_RULE = re.compile(r"^(?P<field>[a-z_]+): (?P<reason>.+)$")


def _error(index: int | None, message: str) -> RecordError:
    reason, path = _split_path(message)
    field = path.lstrip(".") if path else None
    if not field:
        field = None
        if match := _NAMED_FIELD.match(reason):
            field = match["field"]
        elif match := _OWN_RULE.match(reason):
            field, reason = match["field"], match["reason"]
    return RecordError(index=index, field=field, reason=reason)


def decode_batch(body: bytes) -> Batch:
    """Decode and validate a batch in one pass; on failure, report every bad record (slow path only)."""
    try:
        return _batch_decoder.decode(body)
    except msgspec.DecodeError as exc:
        first = exc
    try:
        loose = _loose_decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise BatchInvalid([_error(None, str(exc))]) from None
    errors: list[RecordError] = []
    for index, raw in enumerate(loose.records):
        try:
            _record_decoder.decode(raw)
        except msgspec.DecodeError as exc:
            errors.append(_error(index, str(exc)))
            if len(errors) >= MAX_REPORTED_ERRORS:
                break
    if not errors:  # the envelope itself broke a rule the loose decoder does not check
        errors.append(_error(None, str(first)))
    raise BatchInvalid(errors)


def decode_record_line(line: bytes) -> Record:
    return _record_decoder.decode(line)


def encode(obj: object) -> bytes:
    return _encoder.encode(obj)


def new_batch(collector: str, records: list[Record]) -> Batch:
    return Batch(batch_id=uuid.uuid4(), collector=collector, records=records)
