"""Kubernetes pods as jobs: a record for every pod the agent sees holding GPUs on its node.

A pod is the job `namespace/pod`. It is seen through the samples (dcgm-exporter's pod labels, the
Kubernetes mapper's cgroup lookup) and, where the kubelet's pod-resources API is configured, through the
GPUs it holds, so a pod with no process on its GPU is billed too: its GPUs' samples are given its job id
(where they name no job, or only the pod's uid: the Kubernetes mapper without a pods file).
Its project is its namespace, unless its labels (the pods file, where the agent has one) name one with
`gpu-governance/project`, or a team with `gpu-governance/team`. It starts when first seen (or at the
`start_time` the pods file gives) and, once gone from a round that did read the node, ends `completed`.

A pod holding replicas of a time-sliced GPU (the kubelet's `GPU-uuid::n` ids) holds that share of it: one replica
of 4 is `"gpus": 0.25`. Where the kubelet does not say how many replicas a GPU has, the pod's share is unknown
(null). The GPU's samples go to the pods sharing it in turn (one sample names one job), so each is seen on it.
Where the pods file gives a pod's GPU requests and annotations, a share its spec asks for (HAMi, gpushare, Run:ai:
collectors/requests.py), or else the active thread percentage of an MPS client (its env, bounded by the MPS control
daemon's default: collectors/mps.py), is its share on a GPU the kubelet lists whole; replica ids, where there are,
say it instead.
"""

from __future__ import annotations

import json
import logging
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_DOWN, Decimal
from pathlib import Path
from typing import Any

import msgspec

from collectors.mps import MpsControl, mps_client, mps_share
from collectors.podresources import REPLICA, PodResources, PodResourcesUnavailable, replica_gpu
from collectors.records import GPUS_QUANTUM, JobRecord, Record, SampleRecord, pod_namespace
from collectors.requests import requested_share

log = logging.getLogger("gpu-collector")
PROJECT_LABEL = "gpu-governance/project"
TEAM_LABEL = "gpu-governance/team"
USER_LABEL = "gpu-governance/user"
_POD_UID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def pod_job(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def is_pod_job(job_id: str) -> bool:
    return bool(pod_namespace(job_id))


@dataclass
class PodSeen:
    record: JobRecord
    sent_at: datetime


class KubernetesPods:
    """The agent's job describer for pods; `describe(records, now)` runs once per round, before sending."""

    def __init__(
        self, *, cluster: str, pod_resources: PodResources | None = None, pods_file: str | None = None,
        every: float = 300.0, mps: MpsControl | None = None,
    ) -> None:  # fmt: skip
        self.cluster, self.pod_resources, self.every, self.mps = cluster, pod_resources, every, mps
        self.pods_file = Path(pods_file) if pods_file else None
        self.pods: dict[str, PodSeen] = {}
        self.warned = False
        self.turns: dict[str, int] = defaultdict(int)  # per shared GPU, how many of its samples were handed out

    def _replicas(self) -> dict[str, int] | None:
        """GPU -> its replicas, as the kubelet lists them; None where it cannot say."""
        if self.pod_resources is None:
            return None
        try:
            return self.pod_resources.replicas()
        except PodResourcesUnavailable:
            return None

    def _share(self, devices: set[str], replicas: dict[str, int] | None) -> Decimal | None:
        """The GPUs a pod holds: 1 per whole GPU, 1/n per replica of a GPU made n replicas; None if n is unknown.
        Rounded down to the contract's places, so the shares of one GPU never add up to more than it."""
        held = Decimal(0)
        for device in devices:
            if REPLICA not in device:
                held += 1
            elif replicas and replicas.get(replica_gpu(device)):
                held += (Decimal(1) / replicas[replica_gpu(device)]).quantize(GPUS_QUANTUM, ROUND_DOWN)
            else:
                return None
        return held

    def _pod_share(
        self, job: str, devices: set[str], replicas: dict[str, int] | None, facts: dict, memory: dict[str, float],
        mps_percent: Decimal | None = None,
    ) -> Decimal | None:  # fmt: skip
        """The replicas' share where the pod holds replicas; else its spec's requested share (HAMi, gpushare,
        Run:ai; else MPS's active thread percentage) where that is less than the whole GPUs it is seen on; else
        those GPUs."""
        held = self._share(devices, replicas)
        if any(REPLICA in d for d in devices) or job not in facts:
            return held
        asked = requested_share(facts[job], memory.get(job))
        if asked is None and len(devices) == 1:
            asked = mps_share(facts[job], mps_percent)
        return asked if asked is not None and (held is None or asked < held) else held

    def _held(self) -> dict[str, tuple[str, str]] | None:
        if self.pod_resources is None:
            return {}
        try:
            held = self.pod_resources.held()
        except PodResourcesUnavailable as exc:
            if not self.warned:
                self.warned = True
                log.warning("%s; pods are known from the samples only until it answers", exc)
            return None
        self.warned = False
        return held

    def _facts(self) -> dict[str, dict[str, Any]]:
        """namespace/pod -> the pods file's entry (labels, start_time), where the agent has one."""
        if self.pods_file is None:
            return {}
        try:
            pods = json.loads(self.pods_file.read_text())
        except (OSError, ValueError):
            return {}
        entries = pods.values() if isinstance(pods, dict) else ()
        return {
            pod_job(str(p["namespace"]), str(p["name"])): p
            for p in entries
            if isinstance(p, dict) and p.get("namespace") and p.get("name")
        }

    def describe(self, records: list[Record], now: datetime) -> list[JobRecord]:
        held = self._held()
        samples = [r for r in records if isinstance(r, SampleRecord)]
        by_device = {device: pod_job(*pod) for device, pod in (held or {}).items()}
        by_gpu: dict[str, list[str]] = defaultdict(list)
        for device, job in sorted(by_device.items()):
            if job not in by_gpu[replica_gpu(device)]:
                by_gpu[replica_gpu(device)].append(job)
        from_samples: dict[str, set[str]] = defaultdict(set)
        models: dict[str, str] = {}
        memory: dict[str, float] = {}  # the memory of a pod's GPU, for shares requested in MiB
        for s in samples:
            # The kubelet names the pod where the sample names none, or only the pod's uid (no pods file); a GPU
            # several pods share gives its samples to each in turn.
            if s.gpu_uuid in by_gpu and (s.job_id is None or _POD_UID.match(s.job_id)):
                sharing = by_gpu[s.gpu_uuid]
                s.job_id = sharing[self.turns[s.gpu_uuid] % len(sharing)]
                if len(sharing) > 1:
                    self.turns[s.gpu_uuid] += 1
            if s.job_id is not None and is_pod_job(s.job_id):
                from_samples[s.job_id].add(s.gpu_uuid)
                models.setdefault(s.job_id, s.gpu_model)
                if s.mem_total_mib:
                    memory.setdefault(s.job_id, s.mem_total_mib)
        # The kubelet's own count where it lists the pod (its device ids), else the GPUs the samples show.
        from_kubelet: dict[str, set[str]] = defaultdict(set)
        for device, job in by_device.items():
            from_kubelet[job].add(device)
        gpus = {**from_samples, **from_kubelet}
        facts = self._facts() if gpus else {}
        replicas = self._replicas() if any(REPLICA in d for d in by_device) else {}
        clients = self.mps is not None and any(mps_client(facts[job]) for job in gpus if job in facts)
        mps_percent = self.mps.default_percentage() if self.mps is not None and clients else None
        out = [
            r
            for job, devices in sorted(gpus.items())
            if (r := self._running(job, self._pod_share(job, devices, replicas, facts, memory, mps_percent), models,
                                   facts, now))
        ]  # fmt: skip
        # A round that read nothing (exporter or kubelet unreachable) says nothing about pods being gone.
        if samples and held is not None:
            for job in sorted(self.pods.keys() - gpus.keys()):
                seen = self.pods.pop(job).record
                out.append(msgspec.structs.replace(seen, end_time=max(now, seen.start_time or now), state="completed"))
        return out

    def _running(self, job: str, gpus: Decimal | None, models: dict, facts: dict, now: datetime) -> JobRecord | None:
        seen = self.pods.get(job)
        if seen is not None and seen.record.gpus == gpus and (now - seen.sent_at).total_seconds() < self.every:
            return None
        if seen is None:
            namespace, _, _ = job.partition("/")
            pod = facts.get(job, {})
            labels = (
                {k: str(v) for k, v in (pod.get("labels") or {}).items()} if isinstance(pod.get("labels"), dict) else {}
            )
            start = _time(pod.get("start_time")) or now
            record = JobRecord(
                cluster=self.cluster, job_id=job, user=labels.get(USER_LABEL) or "unknown",
                project=labels.get(PROJECT_LABEL) or namespace, team=labels.get(TEAM_LABEL) or None, gpus=gpus,
                gpu_model=models.get(job), submit_time=start, start_time=start, state="running",
                labels={"namespace": namespace},
            )  # fmt: skip
        else:
            record = msgspec.structs.replace(seen.record, gpus=gpus)
        self.pods[job] = PodSeen(record, now)
        return record


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None
