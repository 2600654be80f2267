"""Findings as people read them: a title in words, the evidence as labelled values with units, the advice that
would save most first. Reads findings; writes nothing."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from governance.efficiency.models import LIVE_STATES, Finding

TITLES = {
    "idle_gpu": "GPUs held while idle",
    "overallocated": "More GPUs requested than used",
    "low_utilization": "Low GPU utilisation",
    "mig_fit": "Fits a MIG slice",
    "batch_headroom": "Room for a larger batch",
    "memory_bound": "Memory-bound",
    "data_starved": "Waiting for data",
    "numa_misaligned": "CPUs on the wrong NUMA node",
    "topology_split": "Placed farther apart than it needs",
    "comm_bound": "Waiting on communication between GPUs",
    "inference_oversized": "Inference service larger than it needs",
    "share_oversized": "A smaller share of the GPU would do",
    "time_slice_contention": "Latency-sensitive job contending on a time-sliced GPU",
    "whole_gpu_share_fit": "A share of one GPU would do",
}
# The order of DESIGN.md's waste partition: on equal money the lever that frees GPUs comes first.
PRIORITY = [
    "idle_gpu", "overallocated", "mig_fit", "whole_gpu_share_fit", "share_oversized", "inference_oversized",
    "low_utilization",
]  # fmt: skip

# key: (label, unit); a key not listed is shown with its name in words.
EVIDENCE = {
    "sm_mean": ("Mean SM", "%"),
    "busy_sm_mean": ("Mean SM of the busy GPUs", "%"),
    "cluster_sm_mean": ("Cluster mean SM (7 days)", "%"),
    "idle_sm_percent": ("Idle below", "% SM"),
    "threshold": ("Threshold", "% SM"),
    "gpu_hours": ("GPU-hours", "h"),
    "idle_gpu_hours": ("Idle GPU-hours", "h"),
    "idle_cost": ("Idle cost", "{currency}"),
    "rate_per_gpu_hour": ("Rate", "{currency} per GPU-hour"),
    "gpus": ("Idle GPUs", ""),
    "since": ("idle since", ""),
    "idle_hours": ("idle", "h"),
    "idle_pattern": ("When idle", ""),
    "pattern": ("when", ""),
    "idle_hours_after_work": ("Idle hours after the last busy hour", "h"),
    "idle_hours_between_work": ("Idle hours between busy hours", "h"),
    "sm_mean_overall": ("mean SM", "%"),
    "gpus_held": ("GPUs held", ""),
    "gpus_idle": ("GPUs idle", ""),
    "idle_gpus": ("Idle GPUs", ""),
    "mem_peak_gib": ("Peak memory", "GiB"),
    "mem_total_gib": ("GPU memory", "GiB"),
    "mem_needed_gib": ("Memory needed (1.2 x peak)", "GiB"),
    "mem_peak_percent": ("Peak memory share", "%"),
    "batch_factor": ("Batch size factor", "x"),
    "profile": ("MIG profile", ""),
    "profile_memory_gib": ("MIG profile memory", "GiB"),
    "profile_sevenths": ("MIG profile size", "/7 of a GPU"),  # findings written before profile_share
    "profile_share": ("MIG profile size (compute slices of the GPU)", ""),
    "io_wait_mean": ("Mean I/O wait", "%"),
    "host_cpu_mean": ("Mean host CPU", "%"),
    "sm_oscillation_cv": ("SM oscillation (coefficient of variation)", ""),
    "tensor_active_mean": ("Mean tensor-core activity", "%"),
    "dram_active_mean": ("Mean DRAM activity (memory bandwidth in use)", "%"),
    "nvlink_mibps_mean": ("Mean NVLink throughput per GPU", "MiB/s"),
    "pcie_mibps_mean": ("Mean PCIe throughput per GPU", "MiB/s"),
    "gpu_indexes": ("The job's GPUs (indexes on the node)", ""),
    "link": ("Farthest link between them", ""),
    "free_indexes": ("GPUs free for the whole run", ""),
    "free_link": ("Farthest link between those", ""),
    "gpu_share": ("Share of one GPU", ""),
    "share_used_percent": ("Share used at most", "%"),
    "suggested_share": ("Share that would do", ""),
    "label": ("Latency-sensitive label", ""),
    "contended_hours": ("Hours on the GPU with other jobs", "h"),
    "co_tenants_max": ("Other jobs on the GPU (most at once in an hour)", ""),
    "gpu_sm_mean_contended": ("The GPU's mean SM while shared", "%"),
    "sm_peak": ("Peak SM", "%"),
    "own_sm_mean": ("Mean SM of its own processes", "%"),
    "share_needed": ("Share its peaks needed", ""),
    "replicas": ("Time-slicing replicas per GPU", ""),
}


def title(rule: str) -> str:
    return TITLES.get(rule, rule.replace("_", " ").capitalize())


def _value(value: object) -> str:
    if isinstance(value, list):
        return "; ".join(_value(v) for v in value)
    if isinstance(value, dict):
        parts = []
        for k, v in value.items():
            label, unit = EVIDENCE.get(k, (k.replace("_", " "), ""))
            parts.append(_value(v) if k == "gpu" else f"{label} {_value(v)}{unit if unit in ('%', 'h') else ''}")
        return ", ".join(parts)
    if isinstance(value, str) and len(value) == 25 and value[10] == "T":
        return f"{value[:10]} {value[11:16]} UTC"  # an ISO time the rule wrote
    if isinstance(value, bool) or value is None:
        return "n/a" if value is None else ("yes" if value else "no")
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.2f}"
    return str(value)


def evidence_rows(evidence: dict, currency: str = "") -> list[tuple[str, str, str]]:
    """(label, value, unit) per piece of evidence, in the order the rule wrote them."""
    rows = []
    for key, value in (evidence or {}).items():
        label, unit = EVIDENCE.get(key, (key.replace("_", " ").capitalize(), ""))
        rows.append((label, _value(value), unit.format(currency=currency)))
    return rows


@dataclass(frozen=True)
class Advice:
    finding_pk: int
    rule: str
    title: str
    advice: str
    saving: Decimal
    currency: str


def _rank(f: Finding) -> tuple:
    priority = PRIORITY.index(f.rule) if f.rule in PRIORITY else len(PRIORITY)
    return (-f.savings, priority, f.pk)


def findings_ordered(findings: Iterable[Finding]) -> list[Finding]:
    """The biggest saving first; on equal money, the rule that frees GPUs first."""
    return sorted(findings, key=_rank)


def leading_advice(*, job_ids: Iterable[int]) -> dict[int, Advice]:
    """Per job, the live finding whose advice would save most (one query for all the jobs)."""
    best: dict[int, Finding] = {}
    ids = list(job_ids)
    if not ids:
        return {}
    for f in Finding.objects.filter(job_id__in=ids, state__in=LIVE_STATES).only(
        "pk", "job_id", "rule", "advice", "savings", "currency"
    ):
        if f.job_id not in best or _rank(f) < _rank(best[f.job_id]):
            best[f.job_id] = f
    return {job_id: Advice(f.pk, f.rule, title(f.rule), f.advice, f.savings, f.currency) for job_id, f in best.items()}


def group_by_job(findings: Iterable[Finding]) -> list[tuple[object, list[Finding]]]:
    """[(job, its findings biggest saving first)], jobs by their biggest saving."""
    groups: dict[int, list[Finding]] = {}
    jobs: dict[int, object] = {}
    for f in findings:
        groups.setdefault(f.job_id, []).append(f)
        jobs[f.job_id] = f.job
    ordered = [(jobs[j], findings_ordered(fs)) for j, fs in groups.items()]
    return sorted(ordered, key=lambda pair: _rank(pair[1][0]))
