"""The ingest record format: one definition shared by the agent and the server.

A batch is {"batch_id": uuid, "collector": name, "records": [...]}, each record a job or a sample
(see DESIGN.md). Decoding and validation happen in one msgspec pass; this module imports no Django.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal, cast

import msgspec

from collectors.mig import MigProfile as MigProfileSpec
from collectors.mig import mig_profile_find
from collectors.runs import Runs, runs_check

# Every field is bounded by physics or by the column it lands in: nothing a collector sends can overflow a sum,
# a partition name or a column later (DESIGN.md: no input can break billing). Each bound composes with
# `X | None = None` for a value that may be unknown.
MAX_NAME = 200  # the CharField columns that names land in
MAX_CLUSTER_NAME = 64
MAX_MIG_PROFILE = 32  # fleet.Gpu.mig_profile
MAX_POWER_W = 10_000  # no GPU board draws 10 kW
MAX_MEMORY_MIB = 4 * 1024 * 1024  # 4 TiB in MiB: several times the largest GPU memory
MAX_BANDWIDTH_MIBPS = 16 * 1024 * 1024  # 16 TiB/s: above any PCIe or NVLink link
MAX_GPU_INDEX = 1024
MAX_NUMA_NODE = 1024
# A job's CPU NUMA nodes are stored as the bits of a signed 64-bit mask (usage_sample.cpu_numa_mask).
MAX_CPU_NUMA_NODE = 63
MAX_JOB_GPUS = 100_000
MAX_LABELS, MAX_LABEL_KEY, MAX_LABEL_VALUE = 64, 320, 1024

Percent = Annotated[float, msgspec.Meta(ge=0, le=100)]
Watts = Annotated[float, msgspec.Meta(ge=0, lt=MAX_POWER_W)]
MiB = Annotated[float, msgspec.Meta(ge=0, lt=MAX_MEMORY_MIB)]
TotalMiB = Annotated[float, msgspec.Meta(gt=0, lt=MAX_MEMORY_MIB)]
MiBps = Annotated[float, msgspec.Meta(ge=0, lt=MAX_BANDWIDTH_MIBPS)]
GpuIndex = Annotated[int, msgspec.Meta(ge=0, lt=MAX_GPU_INDEX)]
NumaNode = Annotated[int, msgspec.Meta(ge=0, lt=MAX_NUMA_NODE)]
CpuNumaNode = Annotated[int, msgspec.Meta(ge=0, lt=MAX_CPU_NUMA_NODE)]
CpuNumaNodes = Annotated[list[CpuNumaNode], msgspec.Meta(max_length=MAX_CPU_NUMA_NODE)]
# A job's GPUs: a whole count, or a share of one GPU (time-slicing, MPS, fractional requests: 0.47), decoded exactly
# from the JSON number. msgspec bounds no Decimal: JobRecord checks it (finite, 0 to MAX_JOB_GPUS, at most
# GPUS_PLACES decimal places, what usage_job.gpus stores). 0, like null, says the source does not know the count.
GpuCount = Decimal
GPUS_PLACES = 6
GPUS_QUANTUM = Decimal(1).scaleb(-GPUS_PLACES)
ONE = Decimal(1)
# Printable (no control character, no NUL) is checked after decoding, once per batch (see `_unprintable`): a
# pattern here would run a regular expression per string and cost most of what decoding costs.
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NAME)]
# Cluster names appear in URL paths (/cluster/<name>/) and partition-free SQL identifiers never: letters,
# digits, dot, dash and underscore. Checked once per distinct name of a batch (see `_bad_clusters`).
ClusterName = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_CLUSTER_NAME)]
MigProfile = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_MIG_PROFILE)]
LabelKey = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_LABEL_KEY)]
LabelValue = Annotated[str, msgspec.Meta(max_length=MAX_LABEL_VALUE)]
Labels = Annotated[dict[LabelKey, LabelValue], msgspec.Meta(max_length=MAX_LABELS)]
UtcTime = Annotated[datetime, msgspec.Meta(tz=True)]

CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

JobState = Literal[
    "pending", "running", "completed", "failed", "cancelled", "timeout", "preempted", "node_fail", "out_of_memory"
]
TERMINAL_STATES = frozenset({"completed", "failed", "cancelled", "timeout", "preempted", "node_fail", "out_of_memory"})


def pod_namespace(job_id: str) -> str:
    """The namespace of a Kubernetes pod's job id `namespace/pod`; '' for any other job id (Slurm's are numbers)."""
    namespace, sep, name = job_id.partition("/")
    return namespace if sep and namespace and name and "/" not in name else ""


# gc=False: records hold only scalars, strings and flat lists or dicts of them, so they can form no reference
# cycle; untracked by the garbage collector, the tens of thousands a batch decodes into cost less to create
# and to free.
class JobRecord(msgspec.Struct, tag_field="kind", tag="job", forbid_unknown_fields=True, omit_defaults=True, gc=False):
    cluster: ClusterName
    job_id: Name
    user: Name
    project: Name
    gpus: GpuCount | None  # null: the source does not know the count
    submit_time: UtcTime
    team: Name | None = None
    gpu_model: Name | None = None
    start_time: UtcTime | None = None
    end_time: UtcTime | None = None
    state: JobState = "running"
    labels: Labels = {}
    # The job's runs where the source knows it ran more than once (sacct's records of a requeued job); absent, the
    # record's start and end are its one run. Only the runs are billed, never the waits between them.
    runs: Runs = []

    def __post_init__(self) -> None:
        runs_check(self.runs, self.submit_time)
        if self.gpus is not None:
            self.gpus = gpus_check(self.gpus)
        if self.start_time is not None and self.start_time < self.submit_time:
            raise ValueError("start_time: is before submit_time")
        if self.end_time is not None:
            if self.start_time is None:
                raise ValueError("start_time: is required when end_time is set")
            if self.end_time < self.start_time:
                raise ValueError("end_time: is before start_time")


def gpus_check(gpus: Decimal) -> Decimal:
    """A job's GPUs as the record contract takes them, or ValueError naming the field and the reason (a record built
    in Python may give an int)."""
    if not isinstance(gpus, Decimal):
        gpus = Decimal(gpus) if isinstance(gpus, int) else Decimal(str(gpus))
    if not gpus.is_finite() or gpus < 0:
        raise ValueError("gpus: must be a number of GPUs from 0 (unknown) up, or null")
    if gpus > MAX_JOB_GPUS:
        raise ValueError(f"gpus: must be at most {MAX_JOB_GPUS}")
    if gpus != gpus.quantize(GPUS_QUANTUM):
        raise ValueError(f"gpus: has more than {GPUS_PLACES} decimal places")
    return gpus.quantize(ONE) if gpus == gpus.to_integral_value() else gpus.normalize()


class SampleRecord(
    msgspec.Struct, tag_field="kind", tag="sample", forbid_unknown_fields=True, omit_defaults=True, gc=False
):
    cluster: ClusterName
    node: Name
    gpu_uuid: Name
    gpu_index: GpuIndex
    gpu_model: Name
    ts: UtcTime
    # Every metric may be unknown (null): a trimmed exporter, a GPU that does not report it. Never zero instead.
    sm_util: Percent | None = None
    mem_used_mib: MiB | None = None
    mem_total_mib: TotalMiB | None = None
    job_id: Name | None = None
    power_w: Watts | None = None
    gpu_numa_node: NumaNode | None = None
    job_cpu_numa_nodes: CpuNumaNodes | None = None
    mig_profile: MigProfile | None = None
    mem_util: Percent | None = None
    tensor_active: Percent | None = None
    dram_active: Percent | None = None
    pcie_rx_mibps: MiBps | None = None
    pcie_tx_mibps: MiBps | None = None
    nvlink_mibps: MiBps | None = None
    host_cpu_util: Percent | None = None
    io_wait: Percent | None = None
    job_sm_util: Percent | None = None  # on a GPU several jobs share, its job's own processes' SM (sm_util: the GPU's)

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


class ClusterNotAllowed(BatchInvalid):
    """Records name a cluster the sender's token may not report: the token's binding is wrong, not the records
    (a collector keeps such a batch and sends it again once the token is fixed)."""


_batch_decoder = msgspec.json.Decoder(Batch)
_loose_decoder = msgspec.json.Decoder(_LooseBatch)
_record_decoder = msgspec.json.Decoder(Record)
_encoder = msgspec.json.Encoder(decimal_format="number")  # "gpus": 0.25, as the contract writes it

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


NESTED_TOO_DEEPLY = "is nested too deeply"
UNPRINTABLE = "holds a control or other unprintable character"
CLUSTER_NAME_RULE = "must be 1-64 letters, digits, dots, dashes or underscores, starting with a letter or digit"
CLUSTER_NOT_ALLOWED = "this token may not report cluster {cluster!r}"
TOO_OLD = "is before {earliest:%Y-%m-%dT%H:%M:%SZ}, the oldest time accepted"
TOO_NEW = "is after {latest:%Y-%m-%dT%H:%M:%SZ}, the latest time accepted"
MIG_UNKNOWN = (
    "{profile!r} is no MIG profile of {model!r} in NVIDIA's published profiles nor in the server's MIG_EXTRA_PROFILES"
)

_JOB_STRINGS = ("cluster", "job_id", "user", "project", "team", "gpu_model")
_SAMPLE_STRINGS = ("cluster", "node", "gpu_uuid", "gpu_model", "job_id", "mig_profile")
_JOB_TIMES = ("submit_time", "start_time", "end_time")


def _plain_ascii(body: bytes) -> bool:
    """True when every string in the JSON `body` is printable ASCII: raw control characters are not valid JSON,
    so only an escape (a backslash) or DEL could put one in a string. A scan in C, instead of a check per
    string."""
    return body.isascii() and b"\\" not in body and b"\x7f" not in body


def _unprintable(record: Record) -> str | None:
    """The first string field of `record` holding an unprintable character, if any."""
    names = _SAMPLE_STRINGS if type(record) is SampleRecord else _JOB_STRINGS
    for name in names:
        value = getattr(record, name)
        if value is not None and not value.isprintable():
            return name
    if type(record) is JobRecord and not all(k.isprintable() and v.isprintable() for k, v in record.labels.items()):
        return "labels"
    return None


def _bad_clusters(records: list[Record]) -> set[str]:
    return {c for c in {r.cluster for r in records} if not CLUSTER_NAME.fullmatch(c)}


def _format_errors(batch: Batch, body: bytes) -> list[RecordError]:
    """What the types cannot say: printable strings, cluster names fit for a URL path."""
    errors: list[RecordError] = []
    if not batch.collector.isprintable():
        errors.append(RecordError(index=None, field="collector", reason=UNPRINTABLE))
    bad = _bad_clusters(batch.records)
    plain = _plain_ascii(body)
    if bad or not plain:
        for index, record in enumerate(batch.records):
            if record.cluster in bad:
                errors.append(RecordError(index=index, field="cluster", reason=CLUSTER_NAME_RULE))
            elif not plain and (field := _unprintable(record)) is not None:
                errors.append(RecordError(index=index, field=field, reason=UNPRINTABLE))
            if len(errors) >= MAX_REPORTED_ERRORS:
                break
    return errors


def decode_batch(body: bytes) -> Batch:
    """Decode and validate a batch in one pass; on failure, report every bad record (slow path only)."""
    try:
        batch = _batch_decoder.decode(body)
    except msgspec.DecodeError as exc:
        first = exc
    except RecursionError:
        raise BatchInvalid([RecordError(index=None, field=None, reason=NESTED_TOO_DEEPLY)]) from None
    else:
        if errors := _format_errors(batch, body):
            raise BatchInvalid(errors)
        return batch
    try:
        loose = _loose_decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise BatchInvalid([_error(None, str(exc))]) from None
    except RecursionError:
        raise BatchInvalid([RecordError(index=None, field=None, reason=NESTED_TOO_DEEPLY)]) from None
    errors = []
    for index, raw in enumerate(loose.records):
        try:
            _record_decoder.decode(raw)
        except msgspec.DecodeError as exc:
            errors.append(_error(index, str(exc)))
            if len(errors) >= MAX_REPORTED_ERRORS:
                break
        except RecursionError:
            errors.append(RecordError(index=index, field=None, reason=NESTED_TOO_DEEPLY))
    if not errors:  # the envelope itself broke a rule the loose decoder does not check
        errors.append(_error(None, str(first)))
    raise BatchInvalid(errors)


def decode_record_line(line: bytes) -> Record:
    """One record of a JSON Lines file; raises msgspec.ValidationError as `decode_batch` would refuse it."""
    try:
        record = _record_decoder.decode(line)
    except RecursionError:
        raise msgspec.ValidationError(NESTED_TOO_DEEPLY) from None
    if _bad_clusters([record]):
        raise msgspec.ValidationError(f"{CLUSTER_NAME_RULE} - at `$.cluster`")
    if (field := _unprintable(record)) is not None:
        raise msgspec.ValidationError(f"{UNPRINTABLE} - at `$.{field}`")
    return record


def decode_line(line: bytes) -> list[Record]:
    """One line of a JSON Lines file: a record, or a whole batch (`{"batch_id", "collector", "records"}`, what the
    agent's `--dry-run` prints); raises msgspec.ValidationError naming the first bad record of a batch."""
    if line.lstrip().startswith(b'{"batch_id"'):
        try:
            batch = decode_batch(line)
        except BatchInvalid as exc:
            first = exc.errors[0]
            where = f"record {first.index}" if first.index is not None else "the batch"
            raise msgspec.ValidationError(f"{where}: {first.field or 'format'}: {first.reason}") from None
        return list(batch.records)
    return [decode_record_line(line)]


def records_check(
    records: list[Record],
    *,
    samples_from: datetime,
    jobs_from: datetime,
    until: datetime,
    clusters: Collection[str] | None = None,
    mig_extra: Sequence[MigProfileSpec] = (),
) -> None:
    """Refuse, naming each record's index and field, times outside what the server accepts now (samples from
    `samples_from`, job times from `jobs_from`, both until `until`), clusters outside `clusters` (None: any) and
    MIG profiles that neither NVIDIA's catalogue (collectors/mig.py) nor the server's `mig_extra` knows.

    These bounds depend on the moment and on who sends, so the server checks them right after decoding.
    """
    errors: list[RecordError] = []
    mig_known: dict[tuple[str, str], bool] = {}  # a batch repeats a few (model, profile) pairs many times
    for index, r in enumerate(records):
        if clusters is not None and r.cluster not in clusters:
            errors.append(
                RecordError(index=index, field="cluster", reason=CLUSTER_NOT_ALLOWED.format(cluster=r.cluster))
            )
        if type(r) is SampleRecord:
            if not samples_from <= r.ts <= until:
                errors.append(RecordError(index=index, field="ts", reason=_out_of_window(r.ts, samples_from, until)))
            if r.mig_profile is not None:
                key = (r.gpu_model, r.mig_profile)
                if (known := mig_known.get(key)) is None:
                    known = mig_known[key] = mig_profile_find(r.gpu_model, r.mig_profile, mig_extra) is not None
                if not known:
                    reason = MIG_UNKNOWN.format(profile=r.mig_profile, model=r.gpu_model)
                    errors.append(RecordError(index=index, field="mig_profile", reason=reason))
        else:
            times = [(name, getattr(r, name)) for name in _JOB_TIMES]
            for name, value in times + [("runs", t) for run in cast(JobRecord, r).runs for t in (run.start, run.end)]:
                if value is not None and not jobs_from <= value <= until:
                    errors.append(RecordError(index=index, field=name, reason=_out_of_window(value, jobs_from, until)))
        if len(errors) >= MAX_REPORTED_ERRORS:
            break
    if any(e.field == "cluster" for e in errors):  # only the binding check names the cluster here
        raise ClusterNotAllowed(errors[:MAX_REPORTED_ERRORS])
    if errors:
        raise BatchInvalid(errors[:MAX_REPORTED_ERRORS])


def _out_of_window(value: datetime, earliest: datetime, latest: datetime) -> str:
    return TOO_OLD.format(earliest=earliest) if value < earliest else TOO_NEW.format(latest=latest)


def encode(obj: object) -> bytes:
    return _encoder.encode(obj)


def new_batch(collector: str, records: list[Record]) -> Batch:
    return Batch(batch_id=uuid.uuid4(), collector=collector, records=records)
